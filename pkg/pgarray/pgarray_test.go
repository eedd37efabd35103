package pgarray

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// TestArraysEncodeAsSlices checks that each array argument type encodes, in binary and in text, to
// the bytes its plain slice encodes to, a nil one to NULL, and that the binary encoding allocates
// nothing per element.
func TestArraysEncodeAsSlices(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	m := pgtype.NewMap()
	id1, id2 := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	now := time.Now()
	cases := []struct {
		name       string
		oid        uint32
		arg, plain any
	}{
		{"uuid", pgtype.UUIDArrayOID, UUIDs{UUID(id1), UUID(id2)}, [][16]byte{id1, id2}},
		{"text", pgtype.TextArrayOID, Texts{"a", "", "ü,\"{}"}, []string{"a", "", "ü,\"{}"}},
		{"int8", pgtype.Int8ArrayOID, Ints{-1, 0, 1 << 40}, []int64{-1, 0, 1 << 40}},
		{"int4", pgtype.Int4ArrayOID, Ints{-7, 3}, []int32{-7, 3}},
		{"timestamptz", pgtype.TimestamptzArrayOID, Times{Time(now), Time(time.Time{})}, []time.Time{now, {}}},
		{"bool", pgtype.BoolArrayOID, Bools{true, false}, []bool{true, false}},
		{"empty", pgtype.Int8ArrayOID, Ints{}, []int64{}},
		{"nil", pgtype.UUIDArrayOID, UUIDs(nil), [][16]byte(nil)},
	}
	for _, c := range cases {
		for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
			got, err := m.Encode(c.oid, format, c.arg, nil)
			require.NoError(t, err, c.name)
			want, err := m.Encode(c.oid, format, c.plain, nil)
			require.NoError(t, err, c.name)
			require.Equal(t, want, got, "%s, format %d", c.name, format)
		}
	}
	allocs := func(n int) float64 {
		a := make(Ints, n)
		for i := range a {
			a[i] = Int(1<<40 + i) // not a small integer, which an interface holds without an allocation
		}
		buf := make([]byte, 0, 64+12*n)
		return testing.AllocsPerRun(50, func() {
			if _, err := m.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, a, buf); err != nil {
				t.Fatal(err)
			}
		})
	}
	require.Equal(t, allocs(1), allocs(100), "allocations encoding 1 element, 100")
}
