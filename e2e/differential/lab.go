package differential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/e2e/bench"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
)

// LabOptions say where the systems come from and where the lab lives.
type LabOptions struct {
	// Dir holds both clusters and the systems' files and logs.
	Dir string
	// BinDir holds the lab's binaries and kueue (built by `make tools kueue`).
	BinDir string
	// FleetqBinDir holds fleetq-manager and fleetq-agent (bench.BuildFleetq).
	FleetqBinDir string
	// FairSharing turns fair sharing on in both systems.
	FairSharing bool
	// Progress receives startup lines; may be nil.
	Progress io.Writer
}

// Lab is two single clusters in apiserver mode, Kueue v0.17 on one and fleetq on the other, with
// the same configuration choices (fair sharing on or off).
type Lab struct {
	Kueue, Fleetq Target

	envs    []*framework.Environment
	systems []bench.System
}

// fairSharingStrategies are Kueue's default preemption strategies, given to both systems.
var fairSharingStrategies = []string{config.LessThanOrEqualToFinalShare, config.LessThanInitialShare}

// StartLab starts both clusters and systems. Stop ends them.
func StartLab(ctx context.Context, o LabOptions) (_ *Lab, err error) {
	if err := lab.CheckBinaries(o.BinDir, []string{"kueue"}); err != nil {
		return nil, fmt.Errorf("%w (build it with 'make kueue')", err)
	}
	moduleDir, err := bench.KueueModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	knobs := bench.Knobs{QPS: 200, Burst: 400}
	k := &bench.Kueue{Knobs: knobs, Binary: filepath.Join(o.BinDir, "kueue"), ModuleDir: moduleDir}
	f := &bench.Fleetq{Knobs: knobs, BinDir: o.FleetqBinDir}
	if o.FairSharing {
		k.Extra = fmt.Sprintf("fairSharing:\n  preemptionStrategies: [%s]\n", strings.Join(fairSharingStrategies, ", "))
		f.Configure = func(c *config.Configuration) {
			c.FairSharing = config.FairSharing{Enable: true, PreemptionStrategies: fairSharingStrategies}
		}
	}
	l := &Lab{}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Stop(context.WithoutCancel(ctx)))
		}
	}()
	for _, sys := range []bench.System{k, f} {
		c, err := l.start(ctx, o, sys)
		if err != nil {
			return nil, err
		}
		if sys.Name() == "kueue" {
			l.Kueue = Target{Name: "kueue", Client: c}
		} else {
			l.Fleetq = Target{Name: "fleetq", Client: c}
		}
	}
	return l, nil
}

// start brings up one cluster and installs one system on it, with no queues of the bench's.
func (l *Lab) start(ctx context.Context, o LabOptions, sys bench.System) (client.Client, error) {
	crds, err := sys.CRDs()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Dir, sys.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("differential lab: %w", err)
	}
	spec := lab.Spec{Mode: lab.ModeAPIServer, Management: lab.ClusterSpec{Name: bench.ManagementCluster}}
	env, err := framework.Setup(ctx, framework.Config{Spec: &spec, Dir: filepath.Join(dir, "lab"), CRDs: crds, Progress: o.Progress})
	if err != nil {
		return nil, fmt.Errorf("%s's cluster: %w", sys.Name(), err)
	}
	l.envs = append(l.envs, env)
	if err := sys.Install(ctx, env, &bench.Scenario{Name: "differential", Topology: bench.SingleCluster}, dir); err != nil {
		return nil, fmt.Errorf("install %s: %w", sys.Name(), err)
	}
	l.systems = append(l.systems, sys)
	return env.Management().Client(), nil
}

// Stop ends both systems and clusters.
func (l *Lab) Stop(ctx context.Context) error {
	var errs []error
	for _, s := range l.systems {
		errs = append(errs, s.Stop(ctx))
	}
	for _, e := range l.envs {
		errs = append(errs, e.Teardown(ctx))
	}
	return errors.Join(errs...)
}
