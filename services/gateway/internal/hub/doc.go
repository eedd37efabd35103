// Package hub shares Redis reads among a gateway replica's SSE clients. Each session with local
// clients has one feed: it learns of new entries from one Pub/Sub connection shared by the whole
// replica (the publish script announces every append's cursor), reads them once with XRANGE from its
// last ID into a ring shared by the session's local subscribers, and wakes them. Each subscriber
// holds only its position in the ring, so an idle one costs a few hundred bytes; one that falls
// more than the ring's size behind is cut loose (Next reports it lost) so it cannot stall the
// others, and resumes from its cursor. The feed never blocks on a subscriber.
//
// So the Redis connections a replica uses are bounded — one Pub/Sub connection plus the command
// pool — whatever the number of clients, and no blocking XREAD ever holds a pooled connection.
// A periodic re-read covers notifications lost while the Pub/Sub connection reconnected.
package hub
