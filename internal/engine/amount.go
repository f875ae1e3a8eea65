package engine

import (
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Amount converts a quantity to the engine's canonical int64 units, so quota arithmetic is exact
// and cheap: milli-units for cpu, plain units (bytes, counts) for everything else.
func Amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// FormatAmount renders a canonical amount the way a person writes it in a manifest ("2", "500m",
// "512Mi", "4"), so pending reasons read naturally. Counts are written in full ("1000", not "1k").
func FormatAmount(name corev1.ResourceName, v int64) string {
	if name == corev1.ResourceCPU {
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	}
	if isByteResource(name) && v != 0 {
		// The largest binary suffix that divides the amount exactly, as Kubernetes prints it.
		for i := len(binarySuffixes) - 1; i >= 0; i-- {
			shift := uint(10 * (i + 1))
			if v%(1<<shift) == 0 {
				return strconv.FormatInt(v>>shift, 10) + binarySuffixes[i]
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

var binarySuffixes = []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// isByteResource tells which resources are counted in bytes and so read best in binary units.
func isByteResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return true
	}
	return len(name) > len(corev1.ResourceHugePagesPrefix) && name[:len(corev1.ResourceHugePagesPrefix)] == corev1.ResourceHugePagesPrefix
}

// MaxAmount bounds any single demand (count × per-pod request) the engine accepts: far above
// any real cluster's quota, and low enough that sums of a few thousand demands stay in int64.
const MaxAmount = math.MaxInt64 >> 12

// mulAmount is count × per-pod request, or false when the product passes MaxAmount (a pod set
// of 2^31 pods × 8Gi would wrap int64 and count as negative usage).
func mulAmount(count int32, per int64) (int64, bool) {
	if count < 0 || per < 0 {
		return 0, false
	}
	if count == 0 || per == 0 {
		return 0, true
	}
	if per > MaxAmount/int64(count) {
		return 0, false
	}
	return int64(count) * per, true
}

// addAmount adds two amounts, saturating at math.MaxInt64 instead of wrapping.
func addAmount(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
