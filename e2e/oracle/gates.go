package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// The scheduler's feature gates are one process-wide object
// (utilfeature.DefaultMutableFeatureGate), read by the plugins when they are
// built and by helpers while they run. Every cluster gets a fresh copy of the
// gate as kube-scheduler's binary starts with it, emulating the requested
// minor with SetEmulationVersion (how upstream expresses per-version defaults,
// lock-to-default and maturity), then the --feature-gates overrides.
var pristineGate featuregate.MutableVersionedFeatureGate

func init() {
	pristineGate = utilfeature.DefaultMutableFeatureGate.DeepCopy()
}

// schedulerGates are the gates NewSchedulerFeaturesFromGates reads (the
// scheduler plugins' whole view of the gates) plus the ones the DRA manager
// and the ResourceSlice tracker read. When the requested version refuses an
// override (a gate locked there), these keep their values while another
// emulation version is tried.
var schedulerGates = []featuregate.Feature{
	features.DRAExtendedResource,
	features.DRAPrioritizedList,
	features.DRAAdminAccess,
	features.DRAConsumableCapacity,
	features.DRADeviceCompatibilityGroups,
	features.DRAFractionalCapacityRange,
	features.DRADerivedAttributes,
	features.DRADeviceTaints,
	features.DRADeviceTaintRules,
	features.DRAListTypeAttributes,
	features.DRAOptionalNodeOperations,
	features.DRASchedulerFilterTimeout,
	features.DRAResourceClaimDeviceStatus,
	features.DRADeviceBindingConditions,
	features.DRAWorkloadResourceClaims,
	features.DRAPartitionableDevices,
	features.DRANodeAllocatableResources,
	features.DynamicResourceAllocation,
	features.GenericWorkload,
	features.TopologyAwareWorkloadScheduling,
}

// gateSetup says which gate the cluster was judged with.
type gateSetup struct {
	// Requested is the --kubernetes-version asked for (1.N).
	Requested string `json:"requested"`
	// Emulated is the emulation version the gate ran at. It differs from
	// Requested only when that version refuses the overrides (a gate locked
	// to its default there); every scheduler gate then keeps the value it
	// would have had at Requested.
	Emulated string `json:"emulated"`
	// Values of the DRA gates the plugins saw.
	Values map[string]bool `json:"values"`
	// Dropped lists overrides of gates this kube-scheduler does not know.
	Dropped []string `json:"dropped,omitempty"`
	// Allocator is the structured allocator variant NewAllocator picks for
	// these gates: "stable", "incubating" or "experimental". The stable one
	// searches pools in map order, so which devices it picks (not whether
	// a pod fits) varies from run to run.
	Allocator string `json:"allocator"`
}

// allocatorVariant names the implementation structured.NewAllocator picks:
// the first whose supported features cover the enabled ones (the sets are
// SupportedFeatures of structured/internal/{stable,incubating} at v0.37.2).
func allocatorVariant(f structured.Features) string {
	stable := structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true}
	incubating := stable
	incubating.DeviceBindingAndStatus = true
	incubating.ConsumableCapacity = true
	incubating.FractionalCapacityRange = true
	switch {
	case stable.Set().IsSuperset(f.Set()):
		return "stable"
	case incubating.Set().IsSuperset(f.Set()):
		return "incubating"
	default:
		return "experimental"
	}
}

// parseMinor reads 1.N, v1.N or 1.N.P and checks 34 <= N <= 37.
func parseMinor(s string) (int, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	parts := strings.Split(t, ".")
	if len(parts) < 2 || parts[0] != "1" {
		return 0, fmt.Errorf("invalid Kubernetes version %q: expected a form like 1.36", s)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < 34 || minor > 37 {
		return 0, fmt.Errorf("kubernetes version %q is not supported: the oracle models 1.34 to 1.37", s)
	}
	return minor, nil
}

// parseGateFlag reads Name=true,Other=false as kube-scheduler's flag does.
func parseGateFlag(flag string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, entry := range strings.Split(flag, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, value, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("invalid feature gate entry %q: expected Name=true or Name=false", entry)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("invalid feature gate entry %q: %v", entry, err)
		}
		out[strings.TrimSpace(name)] = b
	}
	return out, nil
}

func gateAt(minor int) (featuregate.MutableVersionedFeatureGate, error) {
	g := pristineGate.DeepCopy()
	if err := g.SetEmulationVersion(version.MajorMinor(1, uint(minor))); err != nil {
		return nil, fmt.Errorf("emulation version 1.%d: %w", minor, err)
	}
	return g, nil
}

// setGate applies the overrides that differ from the gate's current values
// (setting a gate to what it already is would still be refused where the
// gate does not exist yet, which kube-scheduler's flag never needs).
func setGate(g featuregate.MutableVersionedFeatureGate, want map[string]bool) error {
	diff := map[string]bool{}
	for name, value := range want {
		if g.Enabled(featuregate.Feature(name)) != value {
			diff[name] = value
		}
	}
	return g.SetFromMap(diff)
}

// configureGates installs the scheduler's gate for one cluster.
func configureGates(kubeVersion, flag string) (*gateSetup, error) {
	minor, err := parseMinor(kubeVersion)
	if err != nil {
		return nil, err
	}
	overrides, err := parseGateFlag(flag)
	if err != nil {
		return nil, err
	}
	known := pristineGate.GetAll()
	setup := &gateSetup{Requested: fmt.Sprintf("1.%d", minor)}
	for name := range overrides {
		if _, ok := known[featuregate.Feature(name)]; !ok {
			// kube-scheduler refuses unknown gates; our CLI knows a few that
			// 1.37 removed (GangScheduling). They do not reach the plugins.
			setup.Dropped = append(setup.Dropped, name)
			delete(overrides, name)
		}
	}
	sort.Strings(setup.Dropped)

	g, err := gateAt(minor)
	if err != nil {
		return nil, err
	}
	firstErr := setGate(g, overrides)
	chosen := minor
	if firstErr != nil {
		// The values the scheduler would run with at the requested version
		// if it let these gates be set: its defaults there, then the overrides.
		base, err := gateAt(minor)
		if err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for _, f := range schedulerGates {
			want[string(f)] = base.Enabled(f)
		}
		for name, value := range overrides {
			want[name] = value
		}
		g = nil
		for _, other := range []int{37, 36, 35, 34} {
			if other == minor {
				continue
			}
			candidate, err := gateAt(other)
			if err != nil {
				return nil, err
			}
			if setGate(candidate, want) == nil {
				g, chosen = candidate, other
				break
			}
		}
		if g == nil {
			return nil, fmt.Errorf("kube-scheduler 1.%d refuses these feature gates, and no version 1.34-1.37 accepts the same values: %v", minor, firstErr)
		}
	}
	setup.Emulated = fmt.Sprintf("1.%d", chosen)
	setup.Values = map[string]bool{}
	for _, f := range schedulerGates {
		setup.Values[string(f)] = g.Enabled(f)
	}
	utilfeature.DefaultMutableFeatureGate = g
	utilfeature.DefaultFeatureGate = g
	setup.Allocator = allocatorVariant(dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(g)))
	return setup, nil
}

// defaultGates reports the DRA gate defaults of a version, for checking our
// own table of defaults against upstream's.
func defaultGates(kubeVersion string) (map[string]bool, error) {
	minor, err := parseMinor(kubeVersion)
	if err != nil {
		return nil, err
	}
	g, err := gateAt(minor)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name := range pristineGate.GetAll() {
		n := string(name)
		if strings.HasPrefix(n, "DRA") || n == "DynamicResourceAllocation" || n == "GenericWorkload" || n == "TopologyAwareWorkloadScheduling" {
			out[n] = g.Enabled(name)
		}
	}
	return out, nil
}
