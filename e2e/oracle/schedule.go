package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// extendedClaimSuffix names the claim kube-scheduler creates at bind time for
// extended resources backed by DRA (upstream uses generateName; dra-autoscaler
// reports <pod>-extended-resources, docs/divergences.md F15).
const extendedClaimSuffix = "-extended-resources"

// snapshotLister hands the framework the node snapshot of the pod being
// scheduled (kube-scheduler refreshes its snapshot before every cycle too).
type snapshotLister struct{ s *internalcache.Snapshot }

func (l *snapshotLister) NodeInfos() fwk.NodeInfoLister       { return l.s.NodeInfos() }
func (l *snapshotLister) StorageInfos() fwk.StorageInfoLister { return l.s.StorageInfos() }
func (l *snapshotLister) PodGroupStates() fwk.PodGroupStateLister {
	return l.s.PodGroupStates()
}
func (l *snapshotLister) PodGroups() fwk.PodGroupLister { return l.s.PodGroups() }
func (l *snapshotLister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return l.s.CompositePodGroupStates()
}
func (l *snapshotLister) CompositePodGroups() fwk.CompositePodGroupLister {
	return l.s.CompositePodGroups()
}

// recordingManager is the scheduler's own DRA manager; it only notes the
// claims the DynamicResources plugin hands over in Reserve (what PreBind
// would write), so the oracle can commit them as PreBind would.
type recordingManager struct {
	*dynamicresources.DefaultDRAManager
	claims *recordingTracker
	client kubernetes.Interface
}

func (m *recordingManager) ResourceClaims() fwk.ResourceClaimTracker { return m.claims }

// ResourceSlices lists the slices in name order. The informer's store lists
// them in map order, which the stable allocator keeps (the incubating one
// sorts pools and slices itself); name order is one of the orders a real
// scheduler may see, and makes answers repeatable.
func (m *recordingManager) ResourceSlices() fwk.ResourceSliceLister {
	return sortedSlices{m.DefaultDRAManager.ResourceSlices()}
}

type sortedSlices struct{ fwk.ResourceSliceLister }

func (l sortedSlices) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	slices, err := l.ResourceSliceLister.ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	sorted := append([]*resourceapi.ResourceSlice(nil), slices...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	return sorted, nil
}

type recordingTracker struct {
	fwk.ResourceClaimTracker
	signalled []*resourceapi.ResourceClaim
}

func (t *recordingTracker) SignalClaimPendingAllocation(uid types.UID, claim *resourceapi.ResourceClaim) error {
	t.signalled = append(t.signalled, claim.DeepCopy())
	return t.ResourceClaimTracker.SignalClaimPendingAllocation(uid, claim)
}

// countingHandler counts the claims the assume cache has delivered to its
// handlers; it is registered after the DRA manager's, so once it has seen
// every claim, so has the manager's record of allocated devices.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) OnAdd(any, bool)   { h.n.Add(1) }
func (h *countingHandler) OnUpdate(any, any) {}
func (h *countingHandler) OnDelete(any)      {}

// judge places every pending pod of c, one after another, as kube-scheduler
// would with the gates currently installed, and reports each.
func judge(parent context.Context, c *cluster) ([]podReport, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	logger := klog.FromContext(ctx)
	gate := utilfeature.DefaultFeatureGate

	c.instantiateClaims()

	var objects []runtime.Object
	for _, o := range c.Claims {
		objects = append(objects, o)
	}
	for _, o := range c.Slices {
		objects = append(objects, o)
	}
	for _, o := range c.Classes {
		objects = append(objects, o)
	}
	for _, o := range c.DeviceTaintRules {
		objects = append(objects, o)
	}
	for _, o := range c.Namespaces {
		objects = append(objects, o)
	}
	client := fake.NewSimpleClientset(objects...)
	informerFactory := informers.NewSharedInformerFactory(client, 0)

	// As scheduler.New wires the DRA manager (pkg/scheduler/scheduler.go).
	claimInformer := informerFactory.Resource().V1().ResourceClaims().Informer()
	claimCache := assumecache.NewAssumeCache(logger, claimInformer, "ResourceClaim", "", nil)
	trackerOpts := resourceslicetracker.Options{
		EnableDeviceTaintRules:   gate.Enabled(features.DRADeviceTaintRules),
		EnableConsumableCapacity: gate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            informerFactory.Resource().V1().ResourceSlices(),
		KubeClient:               client,
	}
	if trackerOpts.EnableDeviceTaintRules {
		trackerOpts.TaintInformer = informerFactory.Resource().V1().DeviceTaintRules()
	}
	tracker, err := resourceslicetracker.StartTracker(ctx, trackerOpts)
	if err != nil {
		return nil, fmt.Errorf("resource slice tracker: %w", err)
	}
	defer tracker.Stop()
	defaultManager := dynamicresources.NewDRAManager(ctx, claimCache, tracker, informerFactory)
	counted := &countingHandler{}
	claimCache.AddEventHandler(counted)
	classInformer := informerFactory.Resource().V1().DeviceClasses().Informer()
	var classesSynced func() bool = classInformer.HasSynced
	if gate.Enabled(features.DRAExtendedResource) {
		// As eventhandlers.go chains the extended resource cache in front
		// of the scheduler's DeviceClass handlers.
		erCache := defaultManager.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache)
		reg, err := classInformer.AddEventHandler(erCache)
		if err != nil {
			return nil, err
		}
		classesSynced = reg.HasSynced
	}
	manager := &recordingManager{
		DefaultDRAManager: defaultManager,
		claims:            &recordingTracker{ResourceClaimTracker: defaultManager.ResourceClaims()},
		client:            client,
	}

	// The default profile, with the plugin set the gates select.
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	lister := &snapshotLister{s: internalcache.NewEmptySnapshot()}
	fw, err := frameworkruntime.NewFramework(ctx, frameworkplugins.NewInTreeRegistry(), &cfg.Profiles[0],
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSharedDRAManager(manager),
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(informerFactory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithParallelism(1),
	)
	if err != nil {
		return nil, fmt.Errorf("scheduler framework: %w", err)
	}
	defer func() { _ = fw.Close() }()

	informerFactory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx ends.
	defer func() {
		cancel()
		informerFactory.Shutdown()
	}()
	nsInformer := informerFactory.Core().V1().Namespaces().Informer()
	ruleSynced := func() bool { return true }
	if trackerOpts.EnableDeviceTaintRules {
		ruleSynced = informerFactory.Resource().V1().DeviceTaintRules().Informer().HasSynced
	}
	deadline := time.Now().Add(30 * time.Second)
	for !(claimInformer.HasSynced() && counted.n.Load() >= int64(len(c.Claims)) &&
		tracker.HasSynced() && classesSynced() && nsInformer.HasSynced() && ruleSynced()) {
		if time.Now().After(deadline) {
			return nil, errors.New("informers did not sync within 30 s")
		}
		time.Sleep(20 * time.Microsecond)
	}

	nodes := append([]*v1.Node(nil), c.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	nodeNames := map[string]bool{}
	for _, n := range nodes {
		nodeNames[n.Name] = true
	}
	var bound []*v1.Pod
	var pending []*v1.Pod
	for _, p := range c.Pods {
		switch {
		case isPending(p):
			pending = append(pending, p)
		case p.Spec.NodeName != "" && nodeNames[p.Spec.NodeName] &&
			p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed:
			bound = append(bound, p)
		}
	}
	sortPending(pending)

	reports := make([]podReport, 0, len(pending))
	for _, pod := range pending {
		lister.s = internalcache.NewSnapshot(bound, nodes)
		report, node := schedulePod(ctx, fw, manager, lister.s, nodes, pod)
		reports = append(reports, report)
		if node != "" {
			pod.Spec.NodeName = node
			bound = append(bound, pod)
		}
	}
	return reports, nil
}

// sortPending orders pods as dra-autoscaler places them: highest priority
// first, then oldest, then namespace/name.
func sortPending(pods []*v1.Pod) {
	prio := func(p *v1.Pod) int32 {
		if p.Spec.Priority == nil {
			return 0
		}
		return *p.Spec.Priority
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if prio(a) != prio(b) {
			return prio(a) > prio(b)
		}
		at, bt := a.CreationTimestamp, b.CreationTimestamp
		if !at.Equal(&bt) {
			// An unset time sorts first, as None does in our engine.
			if at.IsZero() || bt.IsZero() {
				return at.IsZero()
			}
			return at.Before(&bt)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// schedulePod runs one scheduling cycle: PreFilter, then Filter on the nodes
// in name order until one fits, then Reserve on it, and commits the claims
// as PreBind would. It returns the report and the chosen node ("" if none).
func schedulePod(ctx context.Context, fw framework.Framework, manager *recordingManager, snapshot *internalcache.Snapshot, nodes []*v1.Node, pod *v1.Pod) (podReport, string) {
	report := podReport{Pod: pod.Namespace + "/" + pod.Name, Reasons: []string{}}
	fail := func(outcome string, reasons ...string) (podReport, string) {
		report.Outcome = outcome
		report.Reasons = append(report.Reasons, reasons...)
		return report, ""
	}
	state := framework.NewCycleState()
	preRes, status, _ := fw.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		if status.IsRejected() {
			return fail("unschedulable", status.Message())
		}
		return fail("error", status.AsError().Error())
	}
	chosen := ""
	for _, node := range nodes {
		if !preRes.AllNodes() && !preRes.NodeNames.Has(node.Name) {
			report.Reasons = append(report.Reasons, node.Name+": not among the nodes PreFilter allows")
			continue
		}
		nodeInfo, err := snapshot.Get(node.Name)
		if err != nil {
			return fail("error", err.Error())
		}
		st := fw.RunFilterPlugins(ctx, state, pod, nodeInfo)
		if st.IsSuccess() {
			chosen = node.Name
			break
		}
		if !st.IsRejected() {
			return fail("error", node.Name+": "+st.AsError().Error())
		}
		report.Reasons = append(report.Reasons, node.Name+": "+st.Message())
	}
	if chosen == "" {
		if len(nodes) == 0 {
			report.Reasons = append(report.Reasons, "no nodes in the snapshot")
		}
		return fail("unschedulable")
	}

	manager.claims.signalled = nil
	if st := fw.RunReservePluginsReserve(ctx, state, pod, chosen); !st.IsSuccess() {
		return fail("error", "reserve on "+chosen+": "+st.Message())
	}
	allocations, err := commitClaims(ctx, manager, pod)
	if err != nil {
		return fail("error", "committing claims: "+err.Error())
	}
	report.Outcome = "fits"
	report.Node = chosen
	report.Allocations = &allocations
	report.Reasons = []string{}
	return report, chosen
}

// commitClaims records what PreBind writes: the allocations Reserve handed
// over, and the pod in every claim's reservedFor. Reported in the pod's claim
// order, the claim for extended resources last.
func commitClaims(ctx context.Context, manager *recordingManager, pod *v1.Pod) ([]claimAllocation, error) {
	tracker := manager.claims
	allocated := map[string]*resourceapi.ResourceClaim{}
	var extended *resourceapi.ResourceClaim
	for _, claim := range tracker.signalled {
		if claim.Namespace == pod.Namespace && isOwnClaim(claim, pod) {
			allocated[claim.Name] = claim
		} else {
			extended = claim
		}
	}
	var out []claimAllocation
	for _, name := range podClaimNames(pod) {
		claim, err := tracker.Get(pod.Namespace, name)
		if err != nil {
			return nil, err
		}
		updated := claim.DeepCopy()
		if a := allocated[name]; a != nil && updated.Status.Allocation == nil {
			updated.Status.Allocation = a.Status.Allocation.DeepCopy()
			out = append(out, reportAllocation(pod.Namespace+"/"+name, updated.Status.Allocation))
		}
		if !resourceclaim.IsReservedForPod(pod, updated, false) {
			updated.Status.ReservedFor = append(updated.Status.ReservedFor,
				resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
		rv, _ := strconv.ParseInt(updated.ResourceVersion, 10, 64)
		updated.ResourceVersion = strconv.FormatInt(rv+1, 10)
		if err := tracker.AssumeClaimAfterAPICall(updated); err != nil {
			return nil, fmt.Errorf("claim %s: %w", name, err)
		}
		tracker.MaybeRemoveClaimPendingAllocation(updated.UID, true)
	}
	if extended != nil && extended.Status.Allocation != nil {
		name := pod.Name + extendedClaimSuffix
		out = append(out, reportAllocation(pod.Namespace+"/"+name, extended.Status.Allocation))
		if err := createExtendedClaim(ctx, manager, pod, name, extended); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isOwnClaim: a claim handed over in Reserve that the pod names (not the
// scheduler's in-memory claim for extended resources).
func isOwnClaim(claim *resourceapi.ResourceClaim, pod *v1.Pod) bool {
	for _, name := range podClaimNames(pod) {
		if name == claim.Name {
			return true
		}
	}
	return false
}

// createExtendedClaim creates the claim for extended resources as PreBind
// does (through the API, then waiting for the informer), so later pods see
// its devices allocated.
func createExtendedClaim(ctx context.Context, manager *recordingManager, pod *v1.Pod, name string, inMemory *resourceapi.ResourceClaim) error {
	claim := inMemory.DeepCopy()
	claim.Name = name
	claim.Namespace = pod.Namespace
	claim.UID = types.UID("oracle-extended-" + pod.Namespace + "-" + name)
	claim.ResourceVersion = ""
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := manager.client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := manager.claims.Get(pod.Namespace, name); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claim %s/%s never reached the informer", pod.Namespace, name)
		}
		time.Sleep(20 * time.Microsecond)
	}
	manager.claims.MaybeRemoveClaimPendingAllocation(inMemory.UID, true)
	return nil
}

var _ = cache.ResourceEventHandler(&countingHandler{})
