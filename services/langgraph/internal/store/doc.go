// Package store is the LangGraph store (the SDK's client.store): a tenant's items, each a JSON
// value under a key in a namespace (a path of labels), in Postgres (langgraph_store). Search is
// by namespace prefix and a filter of value members that must be equal (jsonb containment);
// there is no vector index, so semantic search (the query parameter) is refused by the routes.
// Items may have a ttl in minutes, restarted by reads that ask for it.
package store
