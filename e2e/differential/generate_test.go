package differential

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestGenerateIsDeterministic(t *testing.T) {
	if diff := cmp.Diff(Generate(42), Generate(42)); diff != "" {
		t.Errorf("the same seed gave different scenarios (-first +second):\n%s", diff)
	}
	if cmp.Equal(Generate(42), Generate(43)) {
		t.Error("seeds 42 and 43 gave the same scenario")
	}
}

// TestGeneratedScenariosAreValid checks the rules Kueue's webhooks and CEL enforce, so a run never
// spends a scenario on a rejected object, and that the generator reaches every feature.
func TestGeneratedScenariosAreValid(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(1000) {
		s := Generate(seed)
		n := NamesFor(s)
		if len(s.Queues) < 2 || len(s.Queues) > 20 {
			t.Errorf("seed %d: %d queues, want 2-20", seed, len(s.Queues))
		}
		if s.Steps[0].Kind != Create {
			t.Errorf("seed %d: first step %s, want create", seed, s.Steps[0].Kind)
		}
		for _, o := range s.Objects(n) {
			cq, ok := o.(*kueue.ClusterQueue)
			if !ok {
				continue
			}
			p := cq.Spec.Preemption
			if p.ReclaimWithinCohort == kueue.PreemptionPolicyNever && p.BorrowWithinCohort != nil {
				t.Errorf("seed %d: %s has borrowWithinCohort with reclaimWithinCohort Never", seed, cq.Name)
			}
			if p.BorrowWithinCohort != nil {
				seen["borrowWithinCohort"] = true
			}
			if cq.Spec.QueueingStrategy == kueue.StrictFIFO {
				seen["StrictFIFO"] = true
			}
			if cq.Spec.FlavorFungibility != nil {
				seen["flavorFungibility"] = true
			}
			for _, rg := range cq.Spec.ResourceGroups {
				for _, f := range rg.Flavors {
					if len(f.Resources) != len(rg.CoveredResources) {
						t.Errorf("seed %d: %s flavor %s has %d resources for %d covered", seed, cq.Name, f.Name, len(f.Resources), len(rg.CoveredResources))
					}
					for _, r := range f.Resources {
						limited := r.BorrowingLimit != nil || r.LendingLimit != nil
						if limited && cq.Spec.CohortName == "" {
							t.Errorf("seed %d: %s has a limit without a cohort", seed, cq.Name)
						}
						if r.LendingLimit != nil && r.LendingLimit.Cmp(r.NominalQuota) > 0 {
							t.Errorf("seed %d: %s lendingLimit %s over nominal %s", seed, cq.Name, r.LendingLimit, &r.NominalQuota)
						}
						if limited {
							seen["limits"] = true
						}
					}
				}
			}
		}
		for i, st := range s.Steps {
			seen[string(st.Kind)] = true
			if st.Kind != EditQuota {
				continue
			}
			for _, q := range s.QueuesAt(i) {
				for _, quota := range q.Quotas {
					for r, l := range quota.Lending {
						if quota.Nominal[r] < l {
							t.Errorf("seed %d step %d: %s/%s nominal %d below lending limit %d", seed, i, q.Name, quota.Flavor, quota.Nominal[r], l)
						}
					}
				}
			}
		}
		if s.FairSharing {
			seen["fairSharing"] = true
		}
		for _, c := range s.Cohorts {
			if c.Parent != "" {
				seen["nested cohorts"] = true
			}
		}
		if len(s.Flavors) == 3 {
			seen["three flavors"] = true
		}
	}
	for _, f := range []string{"borrowWithinCohort", "StrictFIFO", "flavorFungibility", "limits", "fairSharing", "nested cohorts", "three flavors", "create", "finish", "delete", "editQuota"} {
		if !seen[f] {
			t.Errorf("no scenario of 1000 has %s", f)
		}
	}
}

func TestQueuesAtAppliesEditsUpToTheStep(t *testing.T) {
	s := &Scenario{
		Queues: []Queue{{Name: "q0", Quotas: []Quota{{Flavor: "f0", Nominal: map[string]int64{"cpu": 2}}}}},
		Steps: []Step{
			{Kind: Create},
			{Kind: EditQuota, Queue: "q0", Flavor: "f0", Nominal: map[string]int64{"cpu": 5}},
			{Kind: EditQuota, Queue: "q0", Flavor: "f0", Nominal: map[string]int64{"cpu": 1}},
		},
	}
	for step, want := range []int64{2, 5, 1} {
		if got := s.QueuesAt(step)[0].Quotas[0].Nominal["cpu"]; got != want {
			t.Errorf("after step %d nominal %d, want %d", step, got, want)
		}
	}
	if got := s.Queues[0].Quotas[0].Nominal["cpu"]; got != 2 {
		t.Errorf("QueuesAt changed the scenario: nominal %d, want 2", got)
	}
}
