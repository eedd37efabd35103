package peer

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestAtCapacity(t *testing.T) {
	pg := 200.0 // µs of Postgres CPU a turn
	p := AtCapacity(Result{PerSec: 2000, Seconds: 4, CPU: CPUPerJob{Postgres: &pg}})
	if p.Fraction != 1 || p.TurnsPerSec != 2000 || p.Offered != 2000 || p.PostgresPerTurn != 200 {
		t.Fatalf("AtCapacity = %+v", p)
	}
	if math.Abs(p.PostgresCores-0.4) > 1e-9 || math.Abs(p.PostgresShare-0.4/float64(runtime.NumCPU())) > 1e-9 {
		t.Fatalf("2,000 turns/s at 200 µs each is 0.4 cores: %+v", p)
	}
	if p := AtCapacity(Result{PerSec: 10}); p.PostgresCores != 0 || p.PostgresPerTurn != 0 {
		t.Fatalf("without Postgres's CPU nothing is made up: %+v", p)
	}
}

// TestSteady runs a short steady load and checks that the worker kept up with it and that the
// Postgres server's CPU was read beside it.
func TestSteady(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Steady(ctx, Options{Base: testBase(), Log: testenv.TestLogger(t)}, 0.5, 100, loadWarmup+2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fraction != 0.5 || p.Offered != 100 || p.Seconds < 1.5 {
		t.Fatalf("Steady = %+v", p)
	}
	// The window's turns finished at about the offered rate (a backlog of the warm-up may add to it).
	if p.TurnsPerSec < 50 {
		t.Errorf("%.0f turns/s finished at 100/s offered", p.TurnsPerSec)
	}
	if newCPUReader().read().hasPostgres && p.PostgresCores <= 0 {
		t.Errorf("the local Postgres served the turns but no CPU was read: %+v", p)
	}
}
