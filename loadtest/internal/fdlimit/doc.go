// Package fdlimit keeps the load generator inside its open-file limit: it raises the limit as far
// as the process may, and tells a run whose streams would need more than that, before it starts,
// what the run needs.
//
// The generator follows every session with a turn outstanding over its own HTTP/1.1 connection,
// so a burst's backlog of 40,000 turns four to a session holds 10,000 streams open at its peak: a
// file descriptor each, and with the stack in the same process a second for the server's end.
// Past the limit, new streams and posts fail with "too many open files" and the report counts
// the generator's own failure as refusals.
package fdlimit
