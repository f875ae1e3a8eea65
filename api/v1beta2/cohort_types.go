/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CohortSpec places a cohort in a tree of cohorts (hierarchical cohorts) and may add quota that all its
// members share.
//
// +kubebuilder:validation:XValidation:rule="has(self.parentName) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit))))",fieldPath=".resourceGroups",reason="FieldValueForbidden",message="borrowingLimit is set but the Cohort has no parent to borrow from; set spec.parentName, or remove borrowingLimit"
// +kubebuilder:validation:XValidation:rule="has(self.parentName) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.lendingLimit))))",fieldPath=".resourceGroups",reason="FieldValueForbidden",message="lendingLimit is set but the Cohort has no parent to lend to; set spec.parentName, or remove lendingLimit"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(gi, g, g.coveredResources.all(ri, r, !(r in g.coveredResources.transformList(j, s, j != ri, s)) && self.resourceGroups.all(hi, h, hi == gi || !(r in h.coveredResources))))",fieldPath=".resourceGroups",message="a resource is covered more than once; list each resource once, in the coveredResources of a single resource group"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(gi, g, self.resourceGroups.all(hi, h, hi <= gi || !sets.intersects(g.flavors.map(f, f.name), h.flavors.map(f, f.name))))",fieldPath=".resourceGroups",message="a flavor appears in more than one resource group; a flavor provides the resources of a single group, so merge the groups or use another flavor"
type CohortSpec struct {
	// parentName is the parent cohort, if any. Unset makes this cohort a
	// root; a parent that does not exist acts as an unlimited root. Cycles
	// deactivate every member until removed.
	// +optional
	ParentName CohortReference `json:"parentName,omitempty"`

	// resourceGroups add quota on top of the members' quota, shared by the
	// cohort's subtree. borrowingLimit and lendingLimit bound exchanges with
	// the parent, so they need a parent. Up to 16 groups.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`

	// fairSharing tunes this cohort's share when fair sharing is enabled.
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`
}

// CohortStatus is what the manager observes about a Cohort.
type CohortStatus struct {
	// fairSharing is the cohort's current share under fair sharing.
	// +optional
	FairSharing *FairSharingStatus `json:"fairSharing,omitempty"`
}

// Cohort is the optional object behind a cohort name, for hierarchical cohorts and cohort-level quota.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={co},categories={kueue}
// +kubebuilder:subresource:status
type Cohort struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec places the cohort in its tree and adds quota.
	// +optional
	Spec CohortSpec `json:"spec,omitempty"`

	// status is what the manager observes about the cohort.
	// +optional
	Status CohortStatus `json:"status,omitempty"`
}

// CohortList is a list of Cohorts, as returned by list calls.
//
// +kubebuilder:object:root=true
type CohortList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cohort `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Cohort{}, &CohortList{})
}
