// Package admincli is the operator's command line over the admin API (services/intake/internal/admin):
//
//	turnstile turns ls [filter flags] [--counts]     search turns, newest first
//	turnstile turns show ID [--timeline]             a turn, or its timeline
//	turnstile turns blockers ID                      the live turns ahead of it in its session
//	turnstile turns cancel ID | turns replay ID [--metadata JSON]
//	turnstile jobs ls | show ID | cancel ID | create --name N --action cancel|replay [filter flags]
//	turnstile workers                                workers holding turns now
//	turnstile dlq ls [filter flags] | dlq replay ID | dlq replay-all --name N [filter flags]
//	turnstile audit [--action A]                     the audit log, newest first
//
// Every command takes --url (default TURNSTILE_ADMIN_URL, else this process's TURNSTILE_HTTP_ADDR
// on localhost), --key (default TURNSTILE_API_KEY) and --output text|json; json prints the API's
// answer as it came, for scripts. A refused request exits non-zero with the problem's detail.
package admincli
