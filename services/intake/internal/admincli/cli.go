package admincli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turnstile-run/turnstile/pkg/app"
)

// Commands are the CLI's subcommands, which intake's role carries.
var Commands = []app.Command{
	{Name: "turns", Usage: "turns ls|show|blockers|cancel|replay", Run: runTurns},
	{Name: "jobs", Usage: "jobs ls|show|create|cancel", Run: runJobs},
	{Name: "workers", Usage: "workers ls|drain", Run: runWorkers},
	{Name: "queue", Usage: "queue ls|pause|resume", Run: runQueue},
	{Name: "admin-config", Usage: "admin-config (the intake's configuration, over the admin API)", Run: runConfig},
	{Name: "dlq", Usage: "dlq ls|replay|replay-all", Run: runDLQ},
	{Name: "audit", Usage: "audit", Run: runAudit},
}

// client is one command's connection to the admin API.
type client struct {
	base, key, output string
	out               io.Writer
	http              *http.Client
}

// flags are the flags every command takes, and the filter flags of those that search.
type flags struct {
	fs                               *flag.FlagSet
	url, key, output                 *string
	status, tenant, agent, session   *string
	metadata, errText, after, before *string
	deadLettered                     *bool
	limit                            *int
	cursor                           *string
}

func newFlags(name string, env app.CommandEnv, filter bool) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := &flags{fs: fs}
	f.url = fs.String("url", defaultURL(env), "the admin API's base URL")
	f.key = fs.String("key", env.Config.Intake.APIKey, "the API key (an admin's sees every tenant)")
	f.output = fs.String("output", "text", "text or json")
	if filter {
		f.status = fs.String("status", "", "statuses, comma separated")
		f.tenant = fs.String("tenant", "", "tenant")
		f.agent = fs.String("agent", "", "agent")
		f.session = fs.String("session", "", "session ID")
		f.metadata = fs.String("metadata", "", "a JSON object the turns' metadata contains")
		f.errText = fs.String("error", "", "text the turns' error contains")
		f.after = fs.String("since", "", "accepted at or after (RFC 3339)")
		f.before = fs.String("until", "", "accepted before (RFC 3339)")
		f.deadLettered = fs.Bool("dead-lettered", false, "dead letters only")
		f.limit = fs.Int("limit", 0, "page size")
		f.cursor = fs.String("cursor", "", "the next page's cursor")
	}
	return f
}

func defaultURL(env app.CommandEnv) string {
	if u := env.Config.Intake.AdminURL; u != "" {
		return u
	}
	host, port, err := net.SplitHostPort(env.Config.HTTPAddr)
	if err != nil || port == "" {
		return "http://127.0.0.1:8080"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// parse reads args (flags may follow positional arguments) and returns the positional ones.
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			return nil, err
		}
		if f.fs.NArg() == 0 {
			break
		}
		pos = append(pos, f.fs.Arg(0))
		args = f.fs.Args()[1:]
	}
	if *f.output != "text" && *f.output != "json" {
		return nil, errors.New("--output must be text or json")
	}
	return pos, nil
}

func (f *flags) client(env app.CommandEnv) *client {
	return &client{
		base: strings.TrimRight(*f.url, "/"), key: *f.key, output: *f.output, out: env.Stdout,
		http: &http.Client{Timeout: 30 * time.Second},
	}
}

// query renders the filter flags as a search's query string.
func (f *flags) query() url.Values {
	q := url.Values{}
	set := func(k string, v *string) {
		if v != nil && *v != "" {
			q.Set(k, *v)
		}
	}
	set("status", f.status)
	set("tenant", f.tenant)
	set("agent", f.agent)
	set("session_id", f.session)
	set("metadata", f.metadata)
	set("error", f.errText)
	set("accepted_after", f.after)
	set("accepted_before", f.before)
	set("cursor", f.cursor)
	if f.deadLettered != nil && *f.deadLettered {
		q.Set("dead_lettered", "true")
	}
	if f.limit != nil && *f.limit > 0 {
		q.Set("limit", fmt.Sprint(*f.limit))
	}
	return q
}

// filter renders the filter flags as a job's filter object.
func (f *flags) filter() (map[string]any, error) {
	out := map[string]any{}
	if *f.status != "" {
		out["status"] = strings.Split(*f.status, ",")
	}
	for k, v := range map[string]string{
		"tenant": *f.tenant, "agent": *f.agent, "session_id": *f.session,
		"error": *f.errText, "accepted_after": *f.after, "accepted_before": *f.before,
	} {
		if v != "" {
			out[k] = v
		}
	}
	if *f.metadata != "" {
		var md map[string]any
		if err := json.Unmarshal([]byte(*f.metadata), &md); err != nil {
			return nil, fmt.Errorf("--metadata must be a JSON object: %w", err)
		}
		out["metadata"] = md
	}
	if *f.deadLettered {
		out["dead_lettered"] = true
	}
	return out, nil
}

// problem is an API refusal.
type problem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// do sends a request and returns the answer's body; a refusal is an error naming its detail.
func (c *client) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }() // a read body: nothing left to report
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var p problem
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, p.Detail)
		}
		return nil, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return b, nil
}

// show prints an answer: as it came with --output json, else through text.
func (c *client) show(b []byte, into any, text func(w *bytes.Buffer)) error {
	if c.output == "json" {
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := c.out.Write(buf.Bytes())
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	// The text is laid out in a buffer, whose writes cannot fail, then aligned once.
	var laid bytes.Buffer
	text(&laid)
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	if _, err := tw.Write(laid.Bytes()); err != nil {
		return err
	}
	return tw.Flush()
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// dash is s, or "-" for an empty field of a line meant to be split on whitespace.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
