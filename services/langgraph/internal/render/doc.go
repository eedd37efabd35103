// Package render maps turnstile's turn model onto LangGraph's: a session's turns become a thread's
// messages (a human message for each turn's input, an AI message for each succeeded turn's output),
// and a turn's native stream events become the SSE events of the stream modes a run asked for.
//
// The modes rendered are values (the thread's messages after the run's input, again after a
// takeover, and with the answer at the end), messages-tuple (sent as "messages" events carrying
// [AI message chunk, metadata], one per turn.delta), updates (the agent's answer and tool calls
// keyed by node), custom (each turn.custom's data, the agent's own events), and the views of a
// run as the one-node graph it stands for: events (LangChain's streamed events of the agent node,
// its tokens, tools and custom events), debug (the node's task, its result and the checkpoint after
// it), tasks and checkpoints (those alone) and tools (tool progress). Any other mode is refused
// (ErrUnsupportedMode, naming it) before a run is created.
//
// Rendering is a pure function of one native event and the run's fixed context (its thread's
// earlier messages and its input), so re-rendering a native event gives the same protocol events:
// the stream layer relies on that to resume in the middle of the events one native event became.
//
// A takeover (turn.retrying) starts the answer again: the new attempt's chunks carry a message ID
// of their own (AIMessageID names the attempt) and a values event first puts the thread back to
// the run's input, so a client never shows the dead attempt's words glued to the new ones, and the
// run's one answer is the last attempt's.
package render
