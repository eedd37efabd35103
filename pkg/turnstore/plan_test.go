package turnstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// planNode is one node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	Index       string     `json:"Index Name"`
	Function    string     `json:"Function Name"`
	ActualLoops float64    `json:"Actual Loops"`
	Plans       []planNode `json:"Plans"`
}

// scaling returns the nodes of plan that make a batch cost more than its rows' index probes: a
// sequential scan of turns or sessions (a batch then costs as much as the table), a scan of the
// partial index of running turns (as much as the turns in flight), and anything run more than once
// that is not an index probe by key (as much as the batch again, for every row).
func scaling(n planNode, under string) []string {
	var bad []string
	path := under + "/" + n.NodeType
	switch {
	case n.NodeType == "Seq Scan" && (n.Relation == "turns" || n.Relation == "sessions"):
		bad = append(bad, path+" on "+n.Relation)
	case n.Index == "turns_running_session_idx":
		bad = append(bad, path+" using "+n.Index)
	case n.ActualLoops > 1 && !probeByKey(n):
		bad = append(bad, fmt.Sprintf("%s run %v times", path, n.ActualLoops))
	}
	for _, c := range n.Plans {
		bad = append(bad, scaling(c, path)...)
	}
	return bad
}

// probeByKey reports whether n is (part of) a lookup of one row by primary key, which is what a
// batch statement may run once per row.
func probeByKey(n planNode) bool {
	switch n.NodeType {
	case "Index Scan", "Index Only Scan":
		// turns_live_session_idx: the claim's probe for an earlier live turn of the session;
		// turn_attempts_pkey: the completion's probe of the attempt it ends.
		return n.Index == "turns_pkey" || n.Index == "sessions_pkey" || n.Index == "turns_live_session_idx" ||
			n.Index == "turn_attempts_pkey"
	case "Function Scan":
		// A turn's own push configs, unpacked once per turn that has any (push_configs.sql): it
		// costs what that turn holds, not what the batch or a table holds.
		return n.Function == "jsonb_to_recordset"
	case "LockRows", "Subquery Scan", "Result", "Limit":
		for _, c := range n.Plans {
			if !probeByKey(c) {
				return false
			}
		}
		return len(n.Plans) > 0
	}
	return false
}

// TestStatementsProbeByKey checks that the batch statements' plans cost each row an index probe by
// primary key, whatever the statistics say: with the statistics taken while the tables were empty
// (as on a server whose autovacuum has not caught up) and with Postgres's generic plan for a
// prepared statement (which estimates every array at ten rows), the claim, the renewal and the
// completion of a batch of turns neither scan turns or sessions, nor scan the partial index of running
// turns, nor run anything but a key probe once per row. Each of those made a batch's cost grow with
// the table, with the turns in flight or with the square of the batch.
func TestStatementsProbeByKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	_, err := env.Pool.Exec(ctx, `ANALYZE turns; ANALYZE sessions`)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, fencing_token,
		accepted_at, finished_at, output)
		SELECT gen_random_uuid(), 'old-' || g, 'default', 'succeeded', 1, nextval('fencing_token_seq'), now(), now(), '{}'
		FROM generate_series(1, 20000) g;
		INSERT INTO sessions (session_id, tenant, last_seq) SELECT 'old-' || g, 'default', 2 FROM generate_series(1, 20000) g`)
	require.NoError(t, err)

	const n = 200
	a := claimParams(n)

	for name, mode := range map[string]string{"GenericPlan": "force_generic_plan", "CustomPlan": "force_custom_plan"} {
		t.Run(name, func(t *testing.T) {
			conn, err := env.Pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			_, err = conn.Exec(ctx, "SET plan_cache_mode = "+mode)
			require.NoError(t, err)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()

			explain := func(name, sql string, args ...any) {
				t.Helper()
				// PREPARE makes the generic plan possible: EXPLAIN of a statement with its values
				// bound is planned for those values.
				_, err := tx.Exec(ctx, "PREPARE stmt AS "+sql)
				require.NoError(t, err)
				defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE stmt") }()
				// EXECUTE's arguments must be literals: Postgres takes no parameters in EXPLAIN.
				var types []string
				require.NoError(t, tx.QueryRow(ctx, `SELECT parameter_types::text[] FROM pg_prepared_statements
					WHERE name = 'stmt'`).Scan(&types))
				lits := make([]string, len(args))
				for i, a := range args {
					require.NoError(t, tx.QueryRow(ctx, "SELECT quote_nullable($1::"+types[i]+"::text)", a).Scan(&lits[i]))
					lits[i] += "::" + types[i]
				}
				var out []byte
				require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE stmt("+strings.Join(lits, ", ")+")").Scan(&out))
				var plans []struct {
					Plan planNode `json:"Plan"`
				}
				require.NoError(t, json.Unmarshal(out, &plans))
				require.Empty(t, scaling(plans[0].Plan, ""), "%s plan:\n%s", name, out)
			}

			explain("claim", claimSQL, a.args()...)
			var tokens []int64
			require.NoError(t, tx.QueryRow(ctx, `SELECT array_agg(fencing_token ORDER BY ord)
				FROM turns JOIN unnest($1::uuid[]) WITH ORDINALITY AS r(turn_id, ord) USING (turn_id)`, a.TurnIDs).Scan(&tokens))
			require.Len(t, tokens, n, "the claim took every turn")
			renew := RenewParams{TurnIDs: a.TurnIDs, Tokens: make(pgarray.Ints, n), TTL: a.TTL}
			for i, tok := range tokens {
				renew.Tokens[i] = pgarray.Int(tok)
			}
			explain("renew", renewSQL, renew.args()...)
			complete := CompleteParams{TurnIDs: a.TurnIDs, Tokens: renew.Tokens, Answers: make(pgarray.Texts, n), States: make(pgarray.Texts, n), Usages: make(pgarray.Texts, n)}
			for i := range complete.Answers {
				complete.Answers[i] = "ok"
			}
			explain("complete", completeSQL, complete.args()...)
			var done int
			require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM turns WHERE turn_id = ANY($1) AND status = 'succeeded'`, a.TurnIDs).Scan(&done))
			require.Equal(t, n, done, "the completion finished every turn")
		})
	}
}

// claimParams returns the claim parameters of n new turns of distinct sessions, every tenth with a
// webhook, a push config and a task.
func claimParams(n int) ClaimParams {
	now := time.Now()
	p := ClaimParams{
		TurnIDs: make(pgarray.UUIDs, n), SessionKeys: make(pgarray.Texts, n), Tenants: make(pgarray.Texts, n),
		Inputs: make(pgarray.Texts, n), Metadata: make([][]byte, n), AcceptedAt: make(pgarray.Times, n),
		Deadlines: make(pgarray.Times, n), Partitions: make(pgarray.Ints, n), Offsets: make(pgarray.Ints, n),
		Owner: "plan", TTL: time.Minute, MaxAttempts: 3, ClientTurnIDs: make([]*uuid.UUID, n),
	}
	for i := range n {
		p.TurnIDs[i] = pgarray.UUID(uuid.Must(uuid.NewV7()))
		p.SessionKeys[i], p.Tenants[i], p.Inputs[i] = pgarray.Text("plan-"+strconv.Itoa(i)), "default", "hi"
		p.AcceptedAt[i], p.Deadlines[i] = pgarray.Time(now), pgarray.Time(now.Add(time.Hour))
		if i%10 == 0 {
			task := uuid.New()
			p.Notifications.Add(i, &wire.Webhook{URL: "https://h.example/" + strconv.Itoa(i)},
				[]wire.PushConfig{{ID: "c", URL: "https://c.example/h"}}, &task, n)
		}
	}
	return p
}
