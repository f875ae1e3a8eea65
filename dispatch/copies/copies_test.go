package copies

import (
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRefusalIsTheWorkersLastingAnswer(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"quota", apierrors.NewForbidden(jobs, "train", errors.New("exceeded quota: no-jobs")), true},
		{"webhook or validation", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "train", field.ErrorList{field.Required(field.NewPath("spec"), "")}), true},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "research"), true},
		{"object of the same name", fmt.Errorf("job copy: %w", fmt.Errorf("*v1.Job research/train already exists in worker us-east and %w", errForeign)), true},
		{"wrapped", fmt.Errorf("job copy: %w", apierrors.NewForbidden(jobs, "train", errors.New("denied"))), true},
		{"conflict", apierrors.NewConflict(jobs, "train", errors.New("changed")), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"server error", apierrors.NewServiceUnavailable("etcd down"), false},
		{"no answer", &url.Error{Op: "Post", URL: "https://us-east", Err: syscall.ECONNREFUSED}, false},
		{"stale copy being deleted", errors.New("a stale copy from an earlier workload of the same name is being deleted"), false},
	}
	for _, c := range cases {
		if got := refusal(c.err); got != c.want {
			t.Errorf("%s: refusal(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestServerErrorIsAnAnswerButNotARefusal(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"a broken webhook in the worker", apierrors.NewInternalError(errors.New(`failed calling webhook "check.example.com"`)), true},
		{"unavailable", fmt.Errorf("job copy: %w", apierrors.NewServiceUnavailable("etcd down")), true},
		{"timeout: the copy may exist", apierrors.NewTimeoutError("create", 5), false},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("denied")), false},
		{"no answer", &url.Error{Op: "Post", URL: "https://us-east", Err: syscall.ECONNREFUSED}, false},
	}
	for _, c := range cases {
		if got := serverError(c.err); got != c.want {
			t.Errorf("%s: serverError(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
