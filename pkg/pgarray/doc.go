// Package pgarray holds the array arguments of turnstile's batch statements (a column of a batch as
// one Postgres array, unnested in the statement) in a form pgx encodes without a heap copy of each
// element.
//
// pgx encodes an array through its Index method, which returns an element in an interface: from a
// plain slice ([]string, [][16]byte, []time.Time, []int64) every element is copied to the heap, a
// [16]byte or a time.Time twice through pgx's wrapper types. Array's Index returns a pointer into
// the slice, which an interface holds as it is, and the pointer's type hands pgx the value through
// the codec's own Valuer interface. The bytes sent are those of the plain slice, in binary and in
// text (TestArraysEncodeAsSlices). The worker's claim and completion statements and intake's
// queued-row insert send their columns this way.
package pgarray
