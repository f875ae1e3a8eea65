// Package affinity decides whether pods may land on a set of labels and taints: the node selector,
// required node affinity and tolerations of a pod template checked against a ResourceFlavor (where
// only the flavor's own label keys matter) or against a real node (where every requirement does).
// The engine uses it to keep flavors a pod could never run on out of flavor assignment; nodefit
// uses it to find the nodes a pod may be placed on.
package affinity

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Mode says how requirements on label keys the labels do not mention are judged.
type Mode int

const (
	// Node judges every requirement: a missing key fails In and Exists, as the scheduler does.
	Node Mode = iota
	// Flavor ignores requirements on keys the flavor does not define: the flavor does not
	// constrain them, so they are left for the scheduler to settle among the flavor's nodes.
	Flavor
)

// Matches reports whether labels satisfy a pod's node selector and required node affinity.
func Matches(labels, selector map[string]string, required *corev1.NodeSelector, mode Mode) bool {
	for k, v := range selector {
		got, ok := labels[k]
		if !ok {
			if mode == Flavor {
				continue
			}
			return false
		}
		if got != v {
			return false
		}
	}
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return true
	}
	// Terms are ORed; the requirements inside a term are ANDed.
	for i := range required.NodeSelectorTerms {
		if termMatches(labels, &required.NodeSelectorTerms[i], mode) {
			return true
		}
	}
	return false
}

func termMatches(labels map[string]string, term *corev1.NodeSelectorTerm, mode Mode) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		// An empty term matches nothing, as in the scheduler.
		return false
	}
	for i := range term.MatchExpressions {
		req := &term.MatchExpressions[i]
		if _, ok := labels[req.Key]; !ok && mode == Flavor {
			continue
		}
		if !requirementMatches(labels, req) {
			return false
		}
	}
	// matchFields select nodes by name; neither a flavor nor our node model can judge them.
	return true
}

func requirementMatches(labels map[string]string, req *corev1.NodeSelectorRequirement) bool {
	v, ok := labels[req.Key]
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && contains(req.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !contains(req.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok || len(req.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(req.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if req.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// UntoleratedTaint returns the first taint that keeps pods away (NoSchedule or NoExecute) and
// that none of the toleration lists tolerates; PreferNoSchedule never blocks.
func UntoleratedTaint(taints []corev1.Taint, tolerations ...[]corev1.Toleration) (corev1.Taint, bool) {
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerated(&t, tolerations) {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

func tolerated(t *corev1.Taint, lists [][]corev1.Toleration) bool {
	for _, list := range lists {
		for i := range list {
			if tolerates(&list[i], t) {
				return true
			}
		}
	}
	return false
}

func tolerates(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		// An empty key with Equal is invalid in the API; treat it as tolerating nothing.
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}

// TaintString renders a taint as key=value:Effect for reasons.
func TaintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
