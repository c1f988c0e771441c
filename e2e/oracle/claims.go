package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podClaimNameAnnotation is what the ResourceClaim controller puts on the
// claims it generates from a pod's template entries.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// isPending: no node yet and not finished (dra-autoscaler's pending pods).
func isPending(p *v1.Pod) bool {
	return p.Spec.NodeName == "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// instantiateClaims does what kube-controller-manager's ResourceClaim
// controller does before the scheduler sees a pending pod: for every
// resourceClaimTemplateName entry without a claim it creates one from the
// template, owned by the pod and annotated with the entry's name, and records
// it in pod.status.resourceClaimStatuses, which is where the scheduler looks
// for it. A claim already generated for the entry (owned by the pod, with the
// annotation) is reused. The controller names claims with generateName; we
// name them <pod>-<entry>, as dra-autoscaler's simulation does, so reports
// can be compared. A missing template leaves the entry without a claim: the
// pod waits, as it would for the controller.
func (c *cluster) instantiateClaims() {
	claims := map[string]*resourceapi.ResourceClaim{}
	for _, cl := range c.Claims {
		claims[cl.Namespace+"/"+cl.Name] = cl
	}
	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	for _, t := range c.Templates {
		templates[t.Namespace+"/"+t.Name] = t
	}
	for _, pod := range c.Pods {
		if !isPending(pod) {
			continue
		}
		for _, entry := range pod.Spec.ResourceClaims {
			if entry.ResourceClaimTemplateName == nil {
				continue
			}
			if hasStatus(pod, entry.Name) {
				continue
			}
			if existing := generatedClaim(c.Claims, pod, entry.Name); existing != nil {
				setStatus(pod, entry.Name, existing.Name)
				continue
			}
			template := templates[pod.Namespace+"/"+*entry.ResourceClaimTemplateName]
			if template == nil {
				continue
			}
			name := fmt.Sprintf("%s-%s", pod.Name, entry.Name)
			if claims[pod.Namespace+"/"+name] != nil {
				// Taken by some other claim: the controller would pick
				// another random suffix; so do we, stably.
				name = fmt.Sprintf("%s-%s-oracle", pod.Name, entry.Name)
			}
			annotations := map[string]string{}
			for k, v := range template.Spec.ObjectMeta.Annotations {
				annotations[k] = v
			}
			annotations[podClaimNameAnnotation] = entry.Name
			claim := &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{
					Name:            name,
					Namespace:       pod.Namespace,
					UID:             types.UID(fmt.Sprintf("oracle-resourceclaim-%s-%s", pod.Namespace, name)),
					ResourceVersion: "1",
					Labels:          template.Spec.ObjectMeta.Labels,
					Annotations:     annotations,
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion:         "v1",
						Kind:               "Pod",
						Name:               pod.Name,
						UID:                pod.UID,
						Controller:         ptr.To(true),
						BlockOwnerDeletion: ptr.To(true),
					}},
				},
				Spec: *template.Spec.Spec.DeepCopy(),
			}
			c.Claims = append(c.Claims, claim)
			claims[pod.Namespace+"/"+name] = claim
			setStatus(pod, entry.Name, name)
		}
	}
}

func hasStatus(pod *v1.Pod, entry string) bool {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == entry {
			return true
		}
	}
	return false
}

func setStatus(pod *v1.Pod, entry, claim string) {
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses,
		v1.PodResourceClaimStatus{Name: entry, ResourceClaimName: ptr.To(claim)})
}

func generatedClaim(claims []*resourceapi.ResourceClaim, pod *v1.Pod, entry string) *resourceapi.ResourceClaim {
	for _, cl := range claims {
		if cl.Namespace != pod.Namespace || cl.Annotations[podClaimNameAnnotation] != entry {
			continue
		}
		if metav1.IsControlledBy(cl, pod) {
			return cl
		}
	}
	return nil
}

// podClaimNames lists the claims a pod's entries name, in entry order, once
// each (nil entries, which the controller recorded as "no claim needed",
// and unresolved ones are left out).
func podClaimNames(pod *v1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	for _, entry := range pod.Spec.ResourceClaims {
		var name *string
		switch {
		case entry.ResourceClaimName != nil:
			name = entry.ResourceClaimName
		case entry.ResourceClaimTemplateName != nil:
			for _, s := range pod.Status.ResourceClaimStatuses {
				if s.Name == entry.Name {
					name = s.ResourceClaimName
				}
			}
		}
		if name != nil && !seen[*name] {
			seen[*name] = true
			out = append(out, *name)
		}
	}
	return out
}
