package chaos

import (
	"testing"
	"time"
)

var testTimings = Timings{WorkerLostTimeout: 15 * time.Second, Freeze: 30 * time.Second}

func TestPlanIsReproducibleFromItsSeed(t *testing.T) {
	workers := []string{"us-east", "us-west", "eu-west"}
	a := Describe(Plan(7, 10*time.Minute, workers, testTimings))
	if b := Describe(Plan(7, 10*time.Minute, workers, testTimings)); a != b {
		t.Fatalf("the same seed gave two schedules:\n%s\nand\n%s", a, b)
	}
	if c := Describe(Plan(8, 10*time.Minute, workers, testTimings)); a == c {
		t.Errorf("seeds 7 and 8 gave the same schedule:\n%s", a)
	}
}

func TestPlanMeetsEveryKindInAShortRunAndRespectsTimings(t *testing.T) {
	workers := []string{"us-east", "us-west", "eu-west"}
	for seed := uint64(1); seed <= 20; seed++ {
		// A run shorter than a round still gets a whole one.
		if plan := Plan(seed, time.Second, workers, testTimings); len(plan) != len(Kinds) {
			t.Errorf("seed %d: a 1 s run has %d faults, want one round of %d", seed, len(plan), len(Kinds))
		}
		plan := Plan(seed, 10*time.Minute, workers, testTimings)
		seen := map[Kind]int{}
		var prevEnd time.Duration
		for _, f := range plan {
			seen[f.Kind]++
			if f.At < prevEnd {
				t.Errorf("seed %d: %s starts at %s, before the previous fault's end and gap %s", seed, f, f.At, prevEnd)
			}
			prevEnd = f.At + f.For + f.Gap
			switch f.Kind {
			case KillManager:
				if f.Target != "" {
					t.Errorf("seed %d: a manager fault names worker %q", seed, f.Target)
				}
			default:
				if f.Target == "" {
					t.Errorf("seed %d: %s names no worker", seed, f.Kind)
				}
			}
			if f.Kind == StopAPIServer && f.For <= testTimings.WorkerLostTimeout {
				t.Errorf("seed %d: API server down %s, not past workerLostTimeout %s", seed, f.For, testTimings.WorkerLostTimeout)
			}
			if f.Kind == FreezeAPIServer && f.For != testTimings.Freeze {
				t.Errorf("seed %d: freeze of %s, want %s", seed, f.For, testTimings.Freeze)
			}
		}
		for _, k := range Kinds {
			if seen[k] == 0 {
				t.Errorf("seed %d: a 10-minute schedule has no %q:\n%s", seed, k, Describe(plan))
			}
		}
	}
}
