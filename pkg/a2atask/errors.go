package a2atask

import "errors"

// errNoTurns is a snapshot without turns: nothing to render (it cannot come from the trigger,
// which always includes the changed turn).
var errNoTurns = errors.New("a2atask: snapshot holds no turns")
