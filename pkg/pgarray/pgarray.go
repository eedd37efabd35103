package pgarray

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Array is an array argument of elements E, encoded through pointers to them (see the package
// documentation). A nil Array is a NULL array.
type Array[E any, P interface {
	*E
	elemValuer
}] []E

// elemValuer is what every element pointer implements: nothing, but it keeps an Array's elements
// to the types below, each of which pgx takes through a Valuer.
type elemValuer interface{ pgElem() }

// Dimensions is one dimension of the slice's length; nil for a nil slice (a NULL array).
func (a Array[E, P]) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index is a pointer to element i.
func (a Array[E, P]) Index(i int) any { return P(&a[i]) }

// IndexType is a pointer of Index's type.
func (a Array[E, P]) IndexType() any { return P(new(E)) }

// UUID is a uuid element.
type UUID [16]byte

func (*UUID) pgElem() {}

// UUIDValue implements pgtype.UUIDValuer.
func (u *UUID) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: *u, Valid: true}, nil }

// Text is a text element.
type Text string

func (*Text) pgElem() {}

// TextValue implements pgtype.TextValuer.
func (t *Text) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

// Int is an integer element, of an integer or a bigint array (pgx checks the range of either).
type Int int64

func (*Int) pgElem() {}

// Int64Value implements pgtype.Int64Valuer.
func (n *Int) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

// Time is a timestamptz element.
type Time time.Time

func (*Time) pgElem() {}

// TimestamptzValue implements pgtype.TimestamptzValuer.
func (t *Time) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

// Bool is a boolean element.
type Bool bool

func (*Bool) pgElem() {}

// BoolValue implements pgtype.BoolValuer.
func (b *Bool) BoolValue() (pgtype.Bool, error) { return pgtype.Bool{Bool: bool(*b), Valid: true}, nil }

// UUIDs is a uuid[] argument.
type UUIDs = Array[UUID, *UUID]

// Texts is a text[] argument.
type Texts = Array[Text, *Text]

// Ints is an integer[] or bigint[] argument.
type Ints = Array[Int, *Int]

// Times is a timestamptz[] argument.
type Times = Array[Time, *Time]

// Bools is a boolean[] argument.
type Bools = Array[Bool, *Bool]
