package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
)

// errNotInLab answers what a lab without a Ray runtime cannot: Serve applications and jobs
// submitted over HTTP.
var errNotInLab = errors.New("the fleetq lab runs no Ray runtime: only RayJobs in K8sJobMode (the default) run here")

// labProvider gives the controllers labDashboard in place of the Ray dashboard's HTTP client.
type labProvider struct {
	reader client.Reader
}

var _ utils.ClientProvider = labProvider{}

// GetDashboardClient implements utils.ClientProvider.
func (p labProvider) GetDashboardClient(manager.Manager) func(*rayv1.RayCluster, string) (dashboardclient.RayDashboardClientInterface, error) {
	return func(cluster *rayv1.RayCluster, _ string) (dashboardclient.RayDashboardClientInterface, error) {
		return &labDashboard{reader: p.reader, cluster: cluster}, nil
	}
}

// GetHttpProxyClient implements utils.ClientProvider; only RayService uses it, and the lab does
// not run that controller.
func (p labProvider) GetHttpProxyClient(manager.Manager) func(string, string, string, int) utils.RayHttpProxyClientInterface {
	return func(string, string, string, int) utils.RayHttpProxyClientInterface { return nil }
}

// labDashboard answers for the Ray runtime of one RayCluster: the Ray job of the RayJob that owns
// the cluster is as far as that RayJob's submitter Job is.
type labDashboard struct {
	reader  client.Reader
	cluster *rayv1.RayCluster
}

var _ dashboardclient.RayDashboardClientInterface = &labDashboard{}

// InitClient implements the interface; there is no HTTP client to set up.
func (d *labDashboard) InitClient(*http.Client, string) {}

// GetJobInfo reports the Ray job from its submitter Job: PENDING until the submitter has pods,
// RUNNING while they run, then SUCCEEDED or FAILED as the submitter ended.
func (d *labDashboard) GetJobInfo(ctx context.Context, jobID string) (*utiltypes.RayJobInfo, error) {
	job, err := d.submitter(ctx)
	if err != nil {
		return nil, err
	}
	info := &utiltypes.RayJobInfo{JobId: jobID, SubmissionId: jobID, JobStatus: rayv1.JobStatusPending}
	if t := job.Status.StartTime; t != nil {
		info.StartTime = uint64(t.UnixMilli())
	}
	if job.Status.Active > 0 || job.Status.Succeeded > 0 {
		info.JobStatus = rayv1.JobStatusRunning
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			info.JobStatus, info.Message = rayv1.JobStatusSucceeded, "Job finished successfully."
		case batchv1.JobFailed:
			info.JobStatus, info.Message = rayv1.JobStatusFailed, c.Message
		default:
			continue
		}
		info.EndTime = uint64(c.LastTransitionTime.UnixMilli())
	}
	return info, nil
}

// submitter reads the submitter Job of the RayJob that owns the cluster. A job not submitted yet
// is a BadRequest, as the dashboard answers for a job it does not know.
func (d *labDashboard) submitter(ctx context.Context) (*batchv1.Job, error) {
	owner := metav1.GetControllerOf(d.cluster)
	if owner == nil || owner.Kind != "RayJob" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("RayCluster %s/%s belongs to no RayJob", d.cluster.Namespace, d.cluster.Name))
	}
	job := &batchv1.Job{}
	// The submitter Job has the RayJob's name (common.RayJobK8sJobNamespacedName).
	err := d.reader.Get(ctx, types.NamespacedName{Namespace: d.cluster.Namespace, Name: owner.Name}, job)
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("no Ray job submitted for RayJob %s/%s yet", d.cluster.Namespace, owner.Name))
	}
	return job, err
}

// ListJobs implements the interface with the cluster's one job, if any.
func (d *labDashboard) ListJobs(ctx context.Context) (*[]utiltypes.RayJobInfo, error) {
	owner := metav1.GetControllerOf(d.cluster)
	if owner == nil {
		return &[]utiltypes.RayJobInfo{}, nil
	}
	info, err := d.GetJobInfo(ctx, owner.Name)
	if apierrors.IsBadRequest(err) {
		return &[]utiltypes.RayJobInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &[]utiltypes.RayJobInfo{*info}, nil
}

// StopJob and DeleteJob succeed: the controllers delete the submitter Job and the cluster
// themselves, which stops the job's pods.
func (d *labDashboard) StopJob(context.Context, string) error { return nil }

// DeleteJob implements the interface (see StopJob).
func (d *labDashboard) DeleteJob(context.Context, string) error { return nil }

// GetJobLog implements the interface: fake pods write no logs.
func (d *labDashboard) GetJobLog(context.Context, string) (*string, error) {
	empty := ""
	return &empty, nil
}

// SubmitJob implements the interface: HTTPMode needs a Ray runtime.
func (d *labDashboard) SubmitJob(context.Context, *rayv1.RayJob) (string, error) {
	return "", errNotInLab
}

// SubmitJobReq implements the interface (see SubmitJob).
func (d *labDashboard) SubmitJobReq(context.Context, *utiltypes.RayJobRequest) (string, error) {
	return "", errNotInLab
}

// UpdateDeployments implements the interface: Ray Serve needs a Ray runtime.
func (d *labDashboard) UpdateDeployments(context.Context, []byte) error { return errNotInLab }

// GetServeDetails implements the interface (see UpdateDeployments).
func (d *labDashboard) GetServeDetails(context.Context) (*utiltypes.ServeDetails, error) {
	return nil, errNotInLab
}

// GetMultiApplicationStatus implements the interface (see UpdateDeployments).
func (d *labDashboard) GetMultiApplicationStatus(context.Context) (map[string]*utiltypes.ServeApplicationStatus, error) {
	return nil, errNotInLab
}
