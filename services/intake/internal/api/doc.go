// Package api is intake's HTTP surface: POST a turn, read a turn's status. Requests are validated
// before anything is produced, every refusal is an RFC 9457 problem document with a stable type, and
// a turn counts as accepted only once Kafka acknowledged its record.
package api
