package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/intake/internal/admin"
)

func usageErr(u string) error { return errors.New("usage: " + u) }

func printTurns(w *bytes.Buffer, p admin.TurnPage) {
	fmt.Fprintln(w, "TURN\tTENANT\tSESSION\tSTATUS\tATTEMPTS\tACCEPTED\tERROR")
	for _, t := range p.Turns {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.TurnID, t.Tenant, t.SessionID, t.Status, t.Attempts,
			when(&t.AcceptedAt), t.Error)
	}
	for s, n := range p.Counts {
		fmt.Fprintf(w, "# %s\t%d\n", s, n)
	}
	if p.NextCursor != "" {
		fmt.Fprintf(w, "# next page: --cursor %s\n", p.NextCursor)
	}
}

func printTurn(w *bytes.Buffer, t admin.TurnView) {
	rows := [][2]string{
		{"turn", t.TurnID},
		{"tenant", t.Tenant},
		{"session", t.SessionID},
		{"agent", t.Agent},
		{"status", t.Status},
		{"attempts", fmt.Sprint(t.Attempts)},
		{"accepted", when(&t.AcceptedAt)},
		{"started", when(t.StartedAt)},
		{"finished", when(t.FinishedAt)},
		{"error", t.Error},
		{"dead-lettered", t.DeadLettered},
		{"replay of", t.ReplayOf},
	}
	for _, r := range rows {
		if r[1] != "" {
			fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
		}
	}
}

func search(ctx context.Context, c *client, path string, q url.Values) error {
	b, err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var p admin.TurnPage
	return c.show(b, &p, func(w *bytes.Buffer) { printTurns(w, p) })
}

func runTurns(ctx context.Context, env app.CommandEnv, args []string) error {
	const u = "turns ls [--status S] [--tenant T] [--session S] [--metadata JSON] [--error TEXT] [--since T] [--until T] [--dead-lettered] [--counts] | " +
		"turns show ID [--timeline] | turns blockers ID | turns cancel ID | turns replay ID [--metadata JSON]"
	if len(args) == 0 {
		return usageErr(u)
	}
	f := newFlags("turns "+args[0], env, true)
	counts := f.fs.Bool("counts", false, "count the matching turns by status")
	timeline := f.fs.Bool("timeline", false, "show the turn's timeline")
	pos, err := f.parse(args[1:])
	if err != nil {
		return fmt.Errorf("%w\nusage: %s", err, u)
	}
	c := f.client(env)
	if args[0] == "ls" {
		q := f.query()
		if *counts {
			q.Set("counts", "true")
		}
		return search(ctx, c, "/v1/admin/turns", q)
	}
	if len(pos) != 1 {
		return usageErr(u)
	}
	path := "/v1/admin/turns/" + url.PathEscape(pos[0])
	switch args[0] {
	case "show":
		if *timeline {
			b, err := c.do(ctx, http.MethodGet, path+"/timeline", nil)
			if err != nil {
				return err
			}
			var tl admin.Timeline
			return c.show(b, &tl, func(w *bytes.Buffer) {
				printTurn(w, tl.Turn)
				fmt.Fprintf(w, "lease\t%s until %s, token %d\n", tl.Lease.Owner, when(tl.Lease.ExpiresAt), tl.Lease.FencingToken)
				for _, a := range tl.Attempts {
					fmt.Fprintf(w, "attempt %d\tworker %s, token %d\tstarted %s, lease until %s, ended %s\t%s %s\tupstream %s\t%d events, %d waits\n",
						a.Attempt, dash(a.Worker), a.FencingToken, when(a.StartedAt), when(a.LeaseExpiresAt), when(a.EndedAt),
						dash(a.Outcome), a.Error, dash(a.Upstream), a.Events, a.Waits)
				}
				for _, n := range tl.Notifications {
					fmt.Fprintf(w, "notification %d\t%s\t%s\t%d attempts\n", n.ID, n.URL, n.Status, n.Attempts)
				}
				for _, r := range tl.Replays {
					fmt.Fprintf(w, "replayed as\t%s\n", r)
				}
			})
		}
		b, err := c.do(ctx, http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		var t admin.TurnView
		return c.show(b, &t, func(w *bytes.Buffer) { printTurn(w, t) })
	case "blockers":
		b, err := c.do(ctx, http.MethodGet, path+"/blockers", nil)
		if err != nil {
			return err
		}
		var bl admin.Blockers
		return c.show(b, &bl, func(w *bytes.Buffer) { printTurns(w, admin.TurnPage{Turns: bl.Blocking}) })
	case "cancel", "replay":
		var body any
		if args[0] == "replay" {
			opts := admin.ReplayOptions{}
			if *f.metadata != "" {
				if err := json.Unmarshal([]byte(*f.metadata), &opts.Metadata); err != nil {
					return fmt.Errorf("--metadata must be a JSON object: %w", err)
				}
			}
			if *f.agent != "" {
				opts.Agent = *f.agent
			}
			body = opts
		}
		b, err := c.do(ctx, http.MethodPost, path+"/"+args[0], body)
		if err != nil {
			return err
		}
		var a admin.Acted
		return c.show(b, &a, func(w *bytes.Buffer) {
			fmt.Fprintf(w, "%s\t%s\t%s\n", args[0], a.TurnID, a.Outcome)
			if a.Replay != nil {
				fmt.Fprintf(w, "replay\t%s\t%s\n", a.Replay.TurnID, a.Replay.Status)
			}
		})
	}
	return usageErr(u)
}

func printJobs(w *bytes.Buffer, jobs []admin.Job) {
	fmt.Fprintln(w, "JOB\tNAME\tACTION\tSTATE\tDONE\tFAILED\tTOTAL\tCREATED")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", j.JobID, j.Name, j.Action, j.State, j.Done, j.Failed, j.Total, when(&j.CreatedAt))
	}
}

// createJob posts a job of action over the filter flags.
func createJob(ctx context.Context, c *client, f *flags, name, action string, force map[string]any) error {
	filter, err := f.filter()
	if err != nil {
		return err
	}
	for k, v := range force {
		filter[k] = v
	}
	body := map[string]any{"name": name, "action": action, "filter": filter}
	b, err := c.do(ctx, http.MethodPost, "/v1/admin/jobs", body)
	if err != nil {
		return err
	}
	var j admin.Job
	return c.show(b, &j, func(w *bytes.Buffer) { printJobs(w, []admin.Job{j}) })
}

func runJobs(ctx context.Context, env app.CommandEnv, args []string) error {
	const u = "jobs ls | jobs show ID | jobs cancel ID | jobs create --name N --action cancel|replay [filter flags]"
	if len(args) == 0 {
		return usageErr(u)
	}
	f := newFlags("jobs "+args[0], env, true)
	name := f.fs.String("name", "", "the job's name")
	action := f.fs.String("action", "", "cancel or replay")
	pos, err := f.parse(args[1:])
	if err != nil {
		return fmt.Errorf("%w\nusage: %s", err, u)
	}
	c := f.client(env)
	switch {
	case args[0] == "ls":
		b, err := c.do(ctx, http.MethodGet, "/v1/admin/jobs", nil)
		if err != nil {
			return err
		}
		var l struct {
			Jobs []admin.Job `json:"jobs"`
		}
		return c.show(b, &l, func(w *bytes.Buffer) { printJobs(w, l.Jobs) })
	case args[0] == "create":
		return createJob(ctx, c, f, *name, *action, nil)
	case (args[0] == "show" || args[0] == "cancel") && len(pos) == 1:
		method, path := http.MethodGet, "/v1/admin/jobs/"+url.PathEscape(pos[0])
		if args[0] == "cancel" {
			method, path = http.MethodPost, path+"/cancel"
		}
		b, err := c.do(ctx, method, path, nil)
		if err != nil {
			return err
		}
		var j admin.Job
		return c.show(b, &j, func(w *bytes.Buffer) { printJobs(w, []admin.Job{j}) })
	}
	return usageErr(u)
}

func runWorkers(ctx context.Context, env app.CommandEnv, args []string) error {
	const u = "workers [ls] | workers drain IDENTITY"
	sub := "ls"
	if len(args) > 0 && (args[0] == "ls" || args[0] == "drain") {
		sub, args = args[0], args[1:]
	}
	f := newFlags("workers "+sub, env, false)
	pos, err := f.parse(args)
	if err != nil {
		return fmt.Errorf("%w\nusage: %s", err, u)
	}
	c := f.client(env)
	if sub == "drain" {
		if len(pos) != 1 {
			return usageErr(u)
		}
		b, err := c.do(ctx, http.MethodPost, "/v1/admin/workers/"+url.PathEscape(pos[0])+"/drain", nil)
		if err != nil {
			return err
		}
		var wk admin.Worker
		return c.show(b, &wk, func(w *bytes.Buffer) { printWorkers(w, []admin.Worker{wk}) })
	}
	if len(pos) != 0 {
		return usageErr(u)
	}
	b, err := c.do(ctx, http.MethodGet, "/v1/admin/workers", nil)
	if err != nil {
		return err
	}
	var l struct {
		Workers []admin.Worker `json:"workers"`
	}
	return c.show(b, &l, func(w *bytes.Buffer) { printWorkers(w, l.Workers) })
}

func printWorkers(w *bytes.Buffer, workers []admin.Worker) {
	fmt.Fprintln(w, "WORKER\tVERSION\tAGENTS\tIN FLIGHT\tSTATE\tLAST SEEN")
	for _, wk := range workers {
		state := "serving"
		switch {
		case !wk.Alive:
			state = "gone"
		case wk.Draining:
			state = "draining"
		case wk.DrainRequested:
			state = "drain requested"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", wk.Identity, wk.Version, strings.Join(wk.Agents, ","), wk.InFlight, state, when(wk.LastSeen))
	}
}

func runQueue(ctx context.Context, env app.CommandEnv, args []string) error {
	const u = "queue ls | queue pause [--tenant T] [--agent A] [--reason TEXT] | queue resume [--tenant T] [--agent A]"
	if len(args) == 0 {
		return usageErr(u)
	}
	f := newFlags("queue "+args[0], env, false)
	tenant := f.fs.String("tenant", "", "the tenant whose turns to pause or resume")
	agent := f.fs.String("agent", "", "the agent whose turns to pause or resume")
	reason := f.fs.String("reason", "", "why (shown with the pause)")
	pos, err := f.parse(args[1:])
	if err != nil {
		return fmt.Errorf("%w\nusage: %s", err, u)
	}
	if len(pos) != 0 {
		return usageErr(u)
	}
	c := f.client(env)
	var b []byte
	switch args[0] {
	case "ls":
		b, err = c.do(ctx, http.MethodGet, "/v1/admin/pauses", nil)
		if err != nil {
			return err
		}
		var l struct {
			Pauses []admin.Pause `json:"pauses"`
		}
		return c.show(b, &l, func(w *bytes.Buffer) { printPauses(w, l.Pauses) })
	case "pause":
		b, err = c.do(ctx, http.MethodPost, "/v1/admin/pauses", admin.PauseScope{Tenant: *tenant, Agent: *agent, Reason: *reason})
	case "resume":
		b, err = c.do(ctx, http.MethodPost, "/v1/admin/pauses/resume", admin.PauseScope{Tenant: *tenant, Agent: *agent})
	default:
		return usageErr(u)
	}
	if err != nil {
		return err
	}
	var p admin.Pause
	return c.show(b, &p, func(w *bytes.Buffer) {
		fmt.Fprintf(w, "%sd\n", args[0])
		printPauses(w, []admin.Pause{p})
	})
}

func printPauses(w *bytes.Buffer, pauses []admin.Pause) {
	fmt.Fprintln(w, "TENANT\tAGENT\tQUEUED\tPAUSED\tBY\tREASON")
	or := func(s string) string {
		if s == "" {
			return "*"
		}
		return s
	}
	for _, p := range pauses {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", or(p.Tenant), or(p.Agent), p.Queued, when(&p.PausedAt), p.PausedBy, p.Reason)
	}
}

func runConfig(ctx context.Context, env app.CommandEnv, args []string) error {
	f := newFlags("admin-config", env, false)
	if _, err := f.parse(args); err != nil {
		return err
	}
	c := f.client(env)
	b, err := c.do(ctx, http.MethodGet, "/v1/admin/config", nil)
	if err != nil {
		return err
	}
	var v struct {
		Settings []config.Setting `json:"settings"`
	}
	return c.show(b, &v, func(w *bytes.Buffer) {
		for _, s := range v.Settings {
			fmt.Fprintf(w, "%s=%s\n", s.Name, s.Value)
		}
	})
}

func runDLQ(ctx context.Context, env app.CommandEnv, args []string) error {
	const u = "dlq ls [filter flags] | dlq replay ID | dlq replay-all --name N [filter flags]"
	if len(args) == 0 {
		return usageErr(u)
	}
	switch args[0] {
	case "ls":
		f := newFlags("dlq ls", env, true)
		if _, err := f.parse(args[1:]); err != nil {
			return err
		}
		return search(ctx, f.client(env), "/v1/admin/dead-letters", f.query())
	case "replay":
		return runTurns(ctx, env, args)
	case "replay-all":
		f := newFlags("dlq replay-all", env, true)
		name := f.fs.String("name", "", "the job's name")
		if _, err := f.parse(args[1:]); err != nil {
			return err
		}
		return createJob(ctx, f.client(env), f, *name, admin.ActionReplay, map[string]any{"dead_lettered": true})
	}
	return usageErr(u)
}

func runAudit(ctx context.Context, env app.CommandEnv, args []string) error {
	f := newFlags("audit", env, false)
	action := f.fs.String("action", "", "only this action")
	limit := f.fs.Int("limit", 0, "page size")
	if _, err := f.parse(args); err != nil {
		return err
	}
	q := url.Values{}
	if *action != "" {
		q.Set("action", *action)
	}
	if *limit > 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	c := f.client(env)
	b, err := c.do(ctx, http.MethodGet, "/v1/admin/audit?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var p admin.AuditPage
	return c.show(b, &p, func(w *bytes.Buffer) {
		fmt.Fprintln(w, "ID\tAT\tKEY\tTENANT\tACTION\tTARGET\tOUTCOME\tDETAIL")
		for _, e := range p.Entries {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, when(&e.At), e.KeyID, e.Tenant, e.Action, e.Target, e.Outcome, e.Detail)
		}
	})
}
