/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys and names MultiKueue uses on the manager and worker clusters; fleetq uses the same so that
// objects it creates are recognised by (and recognise) Kueue's MultiKueue.
const (
	// MultiKueueControllerName is the AdmissionCheck controllerName that selects MultiKueue dispatch.
	MultiKueueControllerName = "kueue.x-k8s.io/multikueue"

	// MultiKueueConfigSecretKey is the key of the Secret data that holds a worker's kubeconfig.
	MultiKueueConfigSecretKey = "kubeconfig"

	// MultiKueueClusterActive is the condition type that is True while a worker cluster is connected.
	MultiKueueClusterActive = "Active"

	// MultiKueueOriginLabel marks objects created in a worker cluster with the manager that owns
	// them, so garbage collection never deletes another manager's objects.
	MultiKueueOriginLabel = "kueue.x-k8s.io/multikueue-origin"

	// MultiKueueOriginUIDAnnotation records, on a worker's copy, the UID of the manager's object.
	MultiKueueOriginUIDAnnotation = "kueue.x-k8s.io/multikueue-origin-uid"

	// MultiKueueWorkerWorkloadPodLabel marks pods that run in a worker cluster for a dispatched workload.
	MultiKueueWorkerWorkloadPodLabel = "kueue.x-k8s.io/multikueue-worker-workload-pod"
)

// LocationType says where a worker cluster's kubeconfig is read from.
type LocationType string

const (
	// SecretLocationType reads the kubeconfig from a Secret in the manager's namespace, key "kubeconfig".
	SecretLocationType LocationType = "Secret"

	// PathLocationType reads the kubeconfig from a file on the manager's disk.
	PathLocationType LocationType = "Path"
)

// KubeConfig locates the kubeconfig of a worker cluster.
type KubeConfig struct {
	// location is the Secret name (locationType Secret) or file path
	// (locationType Path) of the kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Location string `json:"location"`

	// locationType is Secret (default) or Path.
	// +kubebuilder:default=Secret
	// +kubebuilder:validation:Enum=Secret;Path
	// +optional
	LocationType LocationType `json:"locationType,omitempty"`
}

// MultiKueueClusterSpec says how to reach a worker cluster.
type MultiKueueClusterSpec struct {
	// clusterSource is how to connect to the worker cluster.
	// +required
	ClusterSource ClusterSource `json:"clusterSource,omitempty"`
}

// ClusterSource holds exactly one way to connect to a worker cluster.
//
// +kubebuilder:validation:XValidation:rule="[has(self.kubeConfig), has(self.clusterProfileRef)].filter(x, x).size() == 1",message="set exactly one of kubeConfig or clusterProfileRef"
type ClusterSource struct {
	// kubeConfig connects with a kubeconfig from a Secret or a file.
	// +optional
	KubeConfig *KubeConfig `json:"kubeConfig,omitempty,omitzero"`

	// clusterProfileRef connects through a ClusterProfile (cluster inventory API).
	// +optional
	ClusterProfileRef *ClusterProfileReference `json:"clusterProfileRef,omitempty"`
}

// ClusterProfileReference names a ClusterProfile object.
type ClusterProfileReference struct {
	// name of the ClusterProfile.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Name string `json:"name,omitempty"`
}

// MultiKueueClusterStatus is what the manager observes about a worker cluster.
type MultiKueueClusterStatus struct {
	// conditions hold the latest observations, such as Active. Up to 16.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// MultiKueueCluster is a worker cluster the manager can dispatch workloads to.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={mkc},categories={kueue}
// +kubebuilder:printcolumn:name="Connected",JSONPath=".status.conditions[?(@.type=='Active')].status",type=string,description="Whether the manager is connected to the cluster"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date
type MultiKueueCluster struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says how to reach the cluster.
	// +optional
	Spec MultiKueueClusterSpec `json:"spec,omitempty,omitzero"`

	// status is what the manager observes about the cluster.
	// +optional
	Status MultiKueueClusterStatus `json:"status,omitempty"`
}

// MultiKueueClusterList is a list of MultiKueueClusters, as returned by list calls.
//
// +kubebuilder:object:root=true
type MultiKueueClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MultiKueueCluster `json:"items"`
}

// QuotaManagement says who sets the quota of a MultiKueue manager's ClusterQueues.
type QuotaManagement string

const (
	// ManualQuotaManagement leaves manager quota to the administrator.
	ManualQuotaManagement QuotaManagement = "Manual"

	// AutomatedQuotaManagement derives manager quota from the workers (Kueue alpha gate
	// MultiKueueManagerQuotaAutomation).
	AutomatedQuotaManagement QuotaManagement = "Automated"
)

// MultiKueueConfigSpec lists the worker clusters a MultiKueue AdmissionCheck dispatches to.
//
// +kubebuilder:validation:XValidation:rule="!has(self.clusters) || self.clusters.all(c, self.clusters.exists_one(d, d == c))",fieldPath=".clusters",message="each MultiKueueCluster may be listed only once; remove the duplicate"
type MultiKueueConfigSpec struct {
	// clusters are the MultiKueueCluster names to dispatch to, 1 to 20,
	// unique. Order matters: the incremental dispatcher tries them in order.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=256
	// +required
	Clusters []string `json:"clusters,omitempty,omitzero"`

	// quotaManagement is Manual or Automated (Kueue alpha gate
	// MultiKueueManagerQuotaAutomation).
	// +kubebuilder:validation:Enum=Manual;Automated
	// +optional
	QuotaManagement QuotaManagement `json:"quotaManagement,omitempty"`
}

// MultiKueueConfig is the parameters object of a MultiKueue AdmissionCheck.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={mkconf},categories={kueue}
type MultiKueueConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the worker clusters.
	// +optional
	Spec MultiKueueConfigSpec `json:"spec,omitempty"`
}

// MultiKueueConfigList is a list of MultiKueueConfigs, as returned by list calls.
//
// +kubebuilder:object:root=true
type MultiKueueConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MultiKueueConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MultiKueueCluster{}, &MultiKueueClusterList{}, &MultiKueueConfig{}, &MultiKueueConfigList{})
}
