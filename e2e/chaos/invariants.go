package chaos

import (
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/workload"
)

// QuotaViolations checks the quota invariant from the Workload objects alone: what the workloads
// holding quota (and not finished) were assigned, per ClusterQueue, flavor and resource, is within
// the ClusterQueue's nominal quota plus its borrowing limit, and what a cohort's members hold
// together is within their nominal quotas. Each violation names the queue, the amounts and the
// workloads.
func QuotaViolations(cqs []kueue.ClusterQueue, wls []kueue.Workload) []string {
	type key struct {
		cq, flavor string
		res        corev1.ResourceName
	}
	used := map[key]*resource.Quantity{}
	holders := map[string][]string{}
	for i := range wls {
		wl := &wls[i]
		if !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) {
			continue
		}
		cq := string(wl.Status.Admission.ClusterQueue)
		holders[cq] = append(holders[cq], workload.Key(wl))
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			for r, q := range psa.ResourceUsage {
				k := key{cq, string(psa.Flavors[r]), r}
				if used[k] == nil {
					used[k] = &resource.Quantity{}
				}
				used[k].Add(q)
			}
		}
	}
	var out []string
	type cohortKey struct {
		cohort, flavor string
		res            corev1.ResourceName
	}
	cohortNominal := map[cohortKey]*resource.Quantity{}
	cohortUsed := map[cohortKey]*resource.Quantity{}
	cohortMembers := map[string][]string{}
	for i := range cqs {
		cq := &cqs[i]
		cohort := cq.Spec.EffectiveCohort()
		if cohort != "" {
			cohortMembers[cohort] = append(cohortMembers[cohort], cq.Name)
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, fq := range rg.Flavors {
				for _, rq := range fq.Resources {
					k := key{cq.Name, string(fq.Name), rq.Name}
					u := used[k]
					if cohort != "" {
						ck := cohortKey{cohort, string(fq.Name), rq.Name}
						if cohortNominal[ck] == nil {
							cohortNominal[ck], cohortUsed[ck] = &resource.Quantity{}, &resource.Quantity{}
						}
						cohortNominal[ck].Add(rq.NominalQuota)
						if u != nil {
							cohortUsed[ck].Add(*u)
						}
					}
					if u == nil {
						continue
					}
					limit, why := rq.NominalQuota.DeepCopy(), "nominal "+rq.NominalQuota.String()
					switch {
					case cohort == "":
					case rq.BorrowingLimit != nil:
						limit.Add(*rq.BorrowingLimit)
						why += " + borrowing limit " + rq.BorrowingLimit.String()
					default:
						continue // may borrow all the cohort has: the cohort check bounds it
					}
					if u.Cmp(limit) > 0 {
						out = append(out, fmt.Sprintf("clusterqueue %s holds %s %s of flavor %s, over its limit %s (%s); workloads holding quota: %s",
							cq.Name, u.String(), rq.Name, fq.Name, limit.String(), why, strings.Join(sorted(holders[cq.Name]), ", ")))
					}
				}
			}
		}
	}
	for ck, nominal := range cohortNominal {
		if cohortUsed[ck].Cmp(*nominal) > 0 {
			out = append(out, fmt.Sprintf("cohort %s (%s) holds %s %s of flavor %s, over its members' nominal quota %s",
				ck.cohort, strings.Join(sorted(cohortMembers[ck.cohort]), ", "), cohortUsed[ck].String(), ck.res, ck.flavor, nominal.String()))
		}
	}
	sort.Strings(out)
	return out
}

// Outcome is how a submitted job ended, read at the end of a run.
type Outcome string

// The outcomes a job may have; a job with any other ending is a violation.
const (
	Finished Outcome = "finished"
	Pending  Outcome = "pending"
)

// JobOutcome judges one job at the end of a run from the management cluster's Job and Workload
// and, per cluster, how many of its pods were seen to succeed there: finished exactly once
// (complete, all its completions in one cluster; a copy evicted part-way may leave a few
// succeeded pods elsewhere, since the job starts over), or pending with a reason the user can
// read. Anything else — failed, completed in two clusters, complete without its pods seen to
// succeed, admitted but never finished, pending without a reason, no Workload — is a violation,
// returned as a sentence naming the job.
func JobOutcome(job *batchv1.Job, wl *kueue.Workload, succeeded map[string]int) (Outcome, string) {
	name := job.Namespace + "/" + job.Name
	completions := int(ptr.Deref(job.Spec.Completions, 1))
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			var full, seen []string
			for cluster, n := range succeeded {
				seen = append(seen, fmt.Sprintf("%s %d", cluster, n))
				if n >= completions {
					full = append(full, cluster)
				}
			}
			sort.Strings(full)
			sort.Strings(seen)
			switch len(full) {
			case 1:
				return Finished, ""
			case 0:
				return "", fmt.Sprintf("job %s is complete, but no cluster was seen to run its %d completions (succeeded pods: %s)", name, completions, orNone(seen))
			default:
				return "", fmt.Sprintf("job %s ran to completion in %d clusters: %s", name, len(full), strings.Join(full, ", "))
			}
		case batchv1.JobFailed:
			return "", fmt.Sprintf("job %s failed: %s: %s", name, c.Reason, c.Message)
		}
	}
	if wl == nil {
		return "", fmt.Sprintf("job %s has no Workload", name)
	}
	if workload.IsFinished(wl) {
		return "", fmt.Sprintf("job %s: its workload %s finished but the job is not complete", name, workload.Key(wl))
	}
	if workload.IsAdmitted(wl) {
		return "", fmt.Sprintf("job %s is admitted (cluster %q) and has not finished", name, workload.ClusterName(wl))
	}
	for _, c := range wl.Status.Conditions {
		if c.Type == kueue.WorkloadQuotaReserved && c.Message != "" {
			return Pending, ""
		}
	}
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.Message != "" {
			return Pending, ""
		}
	}
	return "", fmt.Sprintf("job %s is pending with no reason on its workload %s", name, workload.Key(wl))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
