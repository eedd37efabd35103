package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/postgres"
)

// Command is a subcommand of a binary: `turnstile NAME ARGS...` runs it instead of the roles and
// exits. Roles contribute theirs (Role.Commands); `migrate` is the runner's own (see the package
// documentation).
type Command struct {
	// Name is the first argument that selects the command.
	Name string
	// Usage is the command's synopsis in the unknown-command error, e.g. "apikey create|list|revoke".
	Usage string
	// Run runs the command with the arguments after Name.
	Run func(ctx context.Context, env CommandEnv, args []string) error
}

// CommandEnv is what a command runs with.
type CommandEnv struct {
	Config config.Config
	Log    *slog.Logger
	// Stdout receives the command's output.
	Stdout io.Writer
}

// Postgres connects to the configured database, applying the migrations first when
// TURNSTILE_MIGRATE=auto, as the roles do. The caller closes the pool.
func (e CommandEnv) Postgres(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := postgres.NewPool(ctx, e.Config.DatabaseURL, postgres.Options{Schema: e.Config.DatabaseSchema})
	if err != nil {
		return nil, err
	}
	if e.Config.Migrate == "auto" {
		if _, err := postgres.Migrate(ctx, pool); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// MigrateCommand applies the embedded migrations (`migrate`) or lists them with their state
// (`migrate status`).
var MigrateCommand = Command{
	Name:  "migrate",
	Usage: "migrate [status]",
	Run: func(ctx context.Context, env CommandEnv, args []string) error {
		pool, err := postgres.NewPool(ctx, env.Config.DatabaseURL, postgres.Options{Schema: env.Config.DatabaseSchema})
		if err != nil {
			return err
		}
		defer pool.Close()
		if len(args) > 0 && args[0] == "status" {
			st, err := postgres.Status(ctx, pool)
			if err != nil {
				return err
			}
			for _, m := range st {
				if _, err := fmt.Fprintf(env.Stdout, "%-8s %s\n", m.State, m.Source.Path); err != nil {
					return err
				}
			}
			return nil
		}
		n, err := postgres.Migrate(ctx, pool)
		if err != nil {
			return err
		}
		env.Log.Info("migrations applied", "count", n)
		return nil
	},
}

// ConfigCommand prints the configuration the process would run with, defaults applied and secrets
// redacted (config.View): `config` as NAME=value lines, `config -output json` as a JSON array.
var ConfigCommand = Command{
	Name:  "config",
	Usage: "config [-output text|json]",
	Run: func(_ context.Context, env CommandEnv, args []string) error {
		fs := flag.NewFlagSet("config", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		output := fs.String("output", "text", "text or json")
		if err := fs.Parse(args); err != nil {
			return err
		}
		view := config.View(env.Config)
		switch *output {
		case "json":
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(view)
		case "text":
			var b strings.Builder
			for _, s := range view {
				fmt.Fprintf(&b, "%s=%s\n", s.Name, s.Value)
			}
			_, err := io.WriteString(env.Stdout, b.String())
			return err
		default:
			return fmt.Errorf("-output %q: want text or json", *output)
		}
	},
}

// commands are a binary's subcommands: migrate and config, then the roles' in role order; the
// first of a name wins.
func commands(available []Role) []Command {
	out := []Command{MigrateCommand, ConfigCommand}
	seen := map[string]bool{MigrateCommand.Name: true, ConfigCommand.Name: true}
	for _, r := range available {
		for _, c := range r.Commands {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// runCommand runs the subcommand args[0] names.
func runCommand(ctx context.Context, env CommandEnv, available []Role, args []string) error {
	cmds := commands(available)
	for _, c := range cmds {
		if c.Name == args[0] {
			return c.Run(ctx, env, args[1:])
		}
	}
	usages := make([]string, len(cmds))
	for i, c := range cmds {
		usages[i] = c.Usage
	}
	return fmt.Errorf("unknown command %q (want: %s)", args[0], strings.Join(usages, ", "))
}
