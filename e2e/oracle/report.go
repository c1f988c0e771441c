package main

import (
	resourceapi "k8s.io/api/resource/v1"
)

// The report has the shape of `dra-autoscaler simulate -o json`, so the two
// can be compared key for key (docs/testing.md, "The upstream oracle").

type podReport struct {
	Pod     string `json:"pod"`
	Outcome string `json:"outcome"`
	Node    string `json:"node,omitempty"`
	// Allocations made for the pod in this run; present only when it fits.
	Allocations *[]claimAllocation `json:"allocations,omitempty"`
	// For people: the PreFilter message, or one line per node.
	Reasons []string `json:"reasons"`
}

type claimAllocation struct {
	Claim        string         `json:"claim"`
	NodeSelector interface{}    `json:"nodeSelector"`
	Results      []deviceResult `json:"results"`
}

type deviceResult struct {
	Request                  string                         `json:"request"`
	Driver                   string                         `json:"driver"`
	Pool                     string                         `json:"pool"`
	Device                   string                         `json:"device"`
	AdminAccess              *bool                          `json:"adminAccess,omitempty"`
	ShareID                  *string                        `json:"shareID,omitempty"`
	ConsumedCapacity         map[string]string              `json:"consumedCapacity,omitempty"`
	Tolerations              []resourceapi.DeviceToleration `json:"tolerations,omitempty"`
	BindingConditions        []string                       `json:"bindingConditions,omitempty"`
	BindingFailureConditions []string                       `json:"bindingFailureConditions,omitempty"`
}

func reportAllocation(claim string, a *resourceapi.AllocationResult) claimAllocation {
	out := claimAllocation{Claim: claim, NodeSelector: map[string]interface{}{}, Results: []deviceResult{}}
	if a.NodeSelector != nil {
		out.NodeSelector = a.NodeSelector
	}
	for _, r := range a.Devices.Results {
		d := deviceResult{
			Request:                  r.Request,
			Driver:                   r.Driver,
			Pool:                     r.Pool,
			Device:                   r.Device,
			Tolerations:              r.Tolerations,
			BindingConditions:        r.BindingConditions,
			BindingFailureConditions: r.BindingFailureConditions,
		}
		if r.AdminAccess != nil && *r.AdminAccess {
			d.AdminAccess = r.AdminAccess
		}
		if r.ShareID != nil {
			s := string(*r.ShareID)
			d.ShareID = &s
		}
		if r.ConsumedCapacity != nil {
			d.ConsumedCapacity = map[string]string{}
			for name, q := range r.ConsumedCapacity {
				d.ConsumedCapacity[string(name)] = q.String()
			}
		}
		out.Results = append(out.Results, d)
	}
	return out
}
