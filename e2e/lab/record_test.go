package lab

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordAndForgetProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := RecordProcess(ctx, dir, "management", ProcessState{Name: "fleetq-manager"}); err == nil {
		t.Fatal("RecordProcess in a directory without a lab succeeded")
	}
	p := &fakeProvider{name: "fake", healthy: true}
	if _, _, err := Up(ctx, p, DefaultSpec(1), UpOptions{Dir: dir}); err != nil {
		t.Fatalf("Up: %v", err)
	}
	etcd := ProcessState{Name: "etcd", PID: 1}
	s, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Clusters[0].Processes = []ProcessState{etcd}
	if err := WriteState(dir, s); err != nil {
		t.Fatal(err)
	}

	first := ProcessState{Name: "fleetq-manager", PID: 10, Args: []string{"/bin/fleetq-manager"}, Log: "/m.log"}
	second := ProcessState{Name: "fleetq-manager", PID: 11, Args: []string{"/bin/fleetq-manager"}, Log: "/m.log"}
	agent := ProcessState{Name: "fleetq-agent", PID: 12}
	steps := []struct {
		do   func() error
		want map[string][]ProcessState
	}{
		{func() error { return RecordProcess(ctx, dir, "management", first) },
			map[string][]ProcessState{"management": {etcd, first}}},
		{func() error { return RecordProcess(ctx, dir, "management", second) },
			map[string][]ProcessState{"management": {etcd, second}}},
		{func() error { return RecordProcess(ctx, dir, "us-east", agent) },
			map[string][]ProcessState{"management": {etcd, second}, "us-east": {agent}}},
		{func() error { return ForgetProcess(ctx, dir, "management", "fleetq-manager") },
			map[string][]ProcessState{"management": {etcd}, "us-east": {agent}}},
		{func() error { return ForgetProcess(ctx, dir, "management", "not-recorded") },
			map[string][]ProcessState{"management": {etcd}, "us-east": {agent}}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		s, err := ReadState(dir)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]ProcessState{}
		for _, c := range s.Clusters {
			if len(c.Processes) > 0 {
				got[c.Name] = c.Processes
			}
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("step %d: processes (-want +got):\n%s", i, diff)
		}
	}

	err = RecordProcess(ctx, dir, "nowhere", agent)
	if err == nil || !strings.Contains(err.Error(), `no cluster "nowhere"`) {
		t.Errorf("RecordProcess on an unknown cluster = %v, want an error naming it", err)
	}
	if _, err := Down(ctx, Providers{"fake": p}, dir); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if err := ForgetProcess(ctx, dir, "management", "fleetq-manager"); err == nil {
		t.Errorf("ForgetProcess after Down = %v, want an error", err)
	}
}
