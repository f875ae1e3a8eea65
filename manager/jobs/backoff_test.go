package jobs

import "testing"

func TestBackoff(t *testing.T) {
	cases := map[string]struct {
		n, base, max int32
		want         string
	}{
		"first eviction waits the base": {n: 1, base: 10, max: 3600, want: "10s"},
		"doubles":                       {n: 3, base: 10, max: 3600, want: "40s"},
		"capped":                        {n: 20, base: 10, max: 300, want: "5m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Backoff(tc.n, tc.base, tc.max).String(); got != tc.want {
				t.Errorf("Backoff = %s, want %s", got, tc.want)
			}
		})
	}
}
