package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatalf("Load(\"\"): %v", err)
	}
	want := &Configuration{
		TypeMeta:         metav1.TypeMeta{APIVersion: APIVersion, Kind: KindConfiguration},
		Namespace:        "fleetq-system",
		ClientConnection: ClientConnection{QPS: ptr.To[float32](50), Burst: ptr.To[int32](100)},
		LeaderElection: LeaderElection{
			Enabled: ptr.To(true), LeaseName: "fleetq-manager",
			LeaseDuration: &metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline: &metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:   &metav1.Duration{Duration: 2 * time.Second},
		},
		Metrics: Endpoint{BindAddress: ":8080"},
		Health:  Endpoint{BindAddress: ":8081"},
		Webhook: Webhook{Port: ptr.To[int32](9443), ServiceName: "fleetq-webhook-service",
			CertValidity: &metav1.Duration{Duration: 90 * 24 * time.Hour}},
		ManagedJobsNamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "fleetq-system"},
		}}},
		Integrations:      Integrations{Frameworks: DefaultFrameworks},
		RequeuingStrategy: RequeuingStrategy{BackoffBaseSeconds: ptr.To[int32](60), BackoffMaxSeconds: ptr.To[int32](3600)},
		MultiCluster: MultiCluster{
			Origin:                 "multikueue",
			GCInterval:             &metav1.Duration{Duration: time.Minute},
			WorkerLostTimeout:      &metav1.Duration{Duration: 5 * time.Minute},
			LostWorkerPolicy:       AtMostOnce,
			FenceTimeout:           &metav1.Duration{Duration: 2 * time.Minute},
			LeaseRenewInterval:     &metav1.Duration{Duration: 15 * time.Second},
			ProbeInterval:          &metav1.Duration{Duration: 10 * time.Second},
			WorkerClientConnection: ClientConnection{QPS: ptr.To[float32](50), Burst: ptr.To[int32](100)},
			ClusterAPINamespace:    "fleetq-system",
			AgentNamespace:         "fleetq-system",
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	cases := map[string]struct {
		file    string
		wantErr []string // substrings that must all appear; none means success
		check   func(t *testing.T, c *Configuration)
	}{
		"minimal file": {
			file: "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\n",
		},
		"overrides keep other defaults": {
			file: `apiVersion: config.fleetq.dev/v1alpha1
kind: Configuration
namespace: batch-system
clientConnection: {qps: 200, burst: 400}
multiCluster: {workerLostTimeout: 90s, fenceTimeout: 30s, leaseRenewInterval: 5s, agentNamespace: fleetq-agents}
fairSharing: {enable: true}
`,
			check: func(t *testing.T, c *Configuration) {
				if *c.ClientConnection.QPS != 200 || *c.ClientConnection.Burst != 400 {
					t.Errorf("clientConnection = %v/%v, want 200/400", *c.ClientConnection.QPS, *c.ClientConnection.Burst)
				}
				if c.MultiCluster.FenceTimeout.Duration != 30*time.Second {
					t.Errorf("fenceTimeout = %v", c.MultiCluster.FenceTimeout.Duration)
				}
				if c.MultiCluster.AgentNamespace != "fleetq-agents" {
					t.Errorf("agentNamespace = %q", c.MultiCluster.AgentNamespace)
				}
				if c.MultiCluster.ClusterAPINamespace != "batch-system" {
					t.Errorf("clusterAPINamespace = %q, want the manager's namespace", c.MultiCluster.ClusterAPINamespace)
				}
				if diff := cmp.Diff([]string{LessThanOrEqualToFinalShare, LessThanInitialShare}, c.FairSharing.PreemptionStrategies); diff != "" {
					t.Errorf("preemptionStrategies: %s", diff)
				}
			},
		},
		"unknown field": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nclientConection: {qps: 5}\n",
			wantErr: []string{`unknown field "clientConection"`},
		},
		"wrong kind": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\n",
			wantErr: []string{`kind: Unsupported value: "AgentConfiguration"`},
		},
		"wrong apiVersion": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n",
			wantErr: []string{`apiVersion: Unsupported value: "config.kueue.x-k8s.io/v1beta2"`},
		},
		"negative qps": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nclientConnection: {qps: -1}\n",
			wantErr: []string{"clientConnection.qps: Invalid value: -1: must be greater than 0"},
		},
		"burst below qps": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nclientConnection: {qps: 100, burst: 10}\n",
			wantErr: []string{"clientConnection.burst: Invalid value: 10: must be at least qps (100)"},
		},
		"worker lost before two fences": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmultiCluster: {workerLostTimeout: 4m, fenceTimeout: 2m}\n",
			wantErr: []string{"multiCluster.workerLostTimeout", "must exceed 2 × fenceTimeout + leaseRenewInterval (4m15s)"},
		},
		"relative kubeconfigDir": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmultiCluster: {kubeconfigDir: kubeconfigs}\n",
			wantErr: []string{`multiCluster.kubeconfigDir: Invalid value: "kubeconfigs": must be an absolute path`},
		},
		"kubeconfigDir at the root": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmultiCluster: {kubeconfigDir: /}\n",
			wantErr: []string{`multiCluster.kubeconfigDir: Invalid value: "/"`},
		},
		"fence shorter than a manager fail-over": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nleaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}\nmultiCluster: {fenceTimeout: 20s, leaseRenewInterval: 5s, workerLostTimeout: 2m}\n",
			wantErr: []string{"multiCluster.fenceTimeout", "must exceed leaderElection.leaseDuration + leaderElection.retryPeriod + multiCluster.leaseRenewInterval (22s)", "on each manager fail-over"},
		},
		"lease renewal too slow for fence": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmultiCluster: {fenceTimeout: 20s, leaseRenewInterval: 15s, workerLostTimeout: 2m}\n",
			wantErr: []string{"multiCluster.leaseRenewInterval", "at most half of fenceTimeout (20s)"},
		},
		"renew deadline not shorter than lease": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nleaderElection: {leaseDuration: 5s, renewDeadline: 5s}\n",
			wantErr: []string{"leaderElection.renewDeadline", "must be shorter than leaseDuration (5s)"},
		},
		"both url and service": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nwebhook: {url: 'https://127.0.0.1:9443', serviceName: svc}\n",
			wantErr: []string{"webhook.serviceName: Forbidden: set either url"},
		},
		"http webhook url": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nwebhook: {url: 'http://127.0.0.1:9443'}\n",
			wantErr: []string{"webhook.url", "must be an https:// URL"},
		},
		"unknown framework": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nintegrations: {frameworks: [batch/job, kubeflow.org/mxjob, batch/job]}\n",
			wantErr: []string{`integrations.frameworks[1]: Unsupported value: "kubeflow.org/mxjob"`, `integrations.frameworks[2]: Duplicate value: "batch/job"`},
		},
		"generic kind with a built-in integration, twice, without pod sets": {
			file: "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nintegrations: {generic: [" +
				"{group: ray.io, version: v1, kind: RayCluster, suspendPath: spec.suspend, podSets: [{name: head, template: spec.headGroupSpec.template}]}," +
				"{group: example.com, version: v1, kind: Trainer, suspendPath: spec.suspend}," +
				"{group: example.com, version: v1, kind: Trainer, suspendPath: spec.suspend, podSets: [{name: main, template: spec.template}]}]}\n",
			wantErr: []string{
				`integrations.generic[0]: Invalid value: "ray.io/raycluster": kind RayCluster is already integrated by framework ray.io/raycluster of integrations.frameworks; list the frameworks without it`,
				`integrations.generic[1].podSets: Required value: at least one pod set`,
				`integrations.generic[2]: Duplicate value: "example.com/trainer"`,
			},
		},
		"backoff max below base": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nrequeuingStrategy: {backoffBaseSeconds: 100, backoffMaxSeconds: 10}\n",
			wantErr: []string{"requeuingStrategy.backoffMaxSeconds: Invalid value: 10: must be at least backoffBaseSeconds (100)"},
		},
		"bad fair sharing strategy": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nfairSharing: {enable: true, preemptionStrategies: [Sometimes]}\n",
			wantErr: []string{`fairSharing.preemptionStrategies[0]: Unsupported value: "Sometimes"`},
		},
		"bad metrics address": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmetrics: {bindAddress: localhost}\n",
			wantErr: []string{"metrics.bindAddress", "must be host:port"},
		},
		"bad profiling address": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nprofiling: {bindAddress: \"127.0.0.1:http\"}\n",
			wantErr: []string{"profiling.bindAddress", "port must be a number"},
		},
		"bad selector": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nmultiCluster: {clusterAPISelector: {matchExpressions: [{key: fleet, operator: Maybe}]}}\n",
			wantErr: []string{"multiCluster.clusterAPISelector.matchExpressions[0].operator"},
		},
		"several errors at once": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: Configuration\nnamespace: Bad_NS\ndefaultLocalQueue: Not Valid\n",
			wantErr: []string{"namespace: Invalid value: \"Bad_NS\"", "defaultLocalQueue: Invalid value: \"Not Valid\""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Load(writeFile(t, tc.file))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Load: unexpected error: %v", err)
				}
				if tc.check != nil {
					tc.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load: want error containing %q, got none", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "reading config file") {
		t.Fatalf("want a read error, got %v", err)
	}
}

func TestLoadAgent(t *testing.T) {
	cases := map[string]struct {
		file, flag string
		wantErr    string
		wantName   string
	}{
		"name from flag": {
			file: "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\n", flag: "us-east", wantName: "us-east",
		},
		"flag overrides file": {
			file: "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\nclusterName: a\n", flag: "b", wantName: "b",
		},
		"name missing": {
			file: "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\n", wantErr: "clusterName: Required value",
		},
		"bad resync": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\nclusterName: a\ncapacityResyncPeriod: -1s\n",
			wantErr: "capacityResyncPeriod: Invalid value: \"-1s\": must be a positive duration",
		},
		"unknown fencing policy": {
			file:    "apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\nclusterName: a\nfencingPolicy: Pause\n",
			wantErr: `fencingPolicy: Unsupported value: "Pause": supported values: "Suspend", "KeepRunning"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := LoadAgent(writeFile(t, tc.file), tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ClusterName != tc.wantName || c.LeaderElection.LeaseName != "fleetq-agent" || c.Origin != "multikueue" || c.FencingPolicy != FenceSuspend {
				t.Errorf("got name %q lease %q origin %q fencingPolicy %q", c.ClusterName, c.LeaderElection.LeaseName, c.Origin, c.FencingPolicy)
			}
		})
	}
}

func TestWriteIsWhatLoadReads(t *testing.T) {
	dir := t.TempDir()
	mgr := &Configuration{Namespace: "fleetq-x"}
	mgr.MultiCluster.LostWorkerPolicy = AtLeastOnce
	mgr.SetDefaults()
	path, err := Write(filepath.Join(dir, "nested", "manager.yaml"), mgr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load of what Write wrote: %v", err)
	}
	if diff := cmp.Diff(mgr, got); diff != "" {
		t.Errorf("manager configuration changed in the round trip (-wrote +read):\n%s", diff)
	}
	agent := &AgentConfiguration{ClusterName: "us-east"}
	agent.SetDefaults()
	if path, err = Write(filepath.Join(dir, "agent.yaml"), agent); err != nil {
		t.Fatal(err)
	}
	gotAgent, err := LoadAgent(path, "")
	if err != nil {
		t.Fatalf("LoadAgent of what Write wrote: %v", err)
	}
	if diff := cmp.Diff(agent, gotAgent); diff != "" {
		t.Errorf("agent configuration changed in the round trip (-wrote +read):\n%s", diff)
	}
	if _, err := Write(filepath.Join(path, "under-a-file.yaml"), agent); err == nil {
		t.Error("writing under a regular file succeeded")
	}
}
