// Package hub shares Redis reads among a gateway replica's SSE clients. Each session with local
// clients has one feed: it learns of new entries from one Pub/Sub connection shared by the whole
// replica (the publish script announces every append's cursor), reads them once with XRANGE from its
// last ID, and fans them out to every local subscriber. A slow subscriber whose buffer fills is cut
// loose (its Overflowed channel closes) so it cannot stall the others; it resumes from its cursor.
//
// So the Redis connections a replica uses are bounded — one Pub/Sub connection plus the command
// pool — whatever the number of clients, and no blocking XREAD ever holds a pooled connection.
// A periodic re-read covers notifications lost while the Pub/Sub connection reconnected.
package hub
