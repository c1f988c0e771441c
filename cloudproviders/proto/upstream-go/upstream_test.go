package upstreamgo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/yaml"
)

const (
	pkg     = "clusterautoscaler.cloudprovider.v1.externalgrpc."
	service = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/"
	// The detail type our providers attach to scale-up failures (proto/extensions.proto).
	scaleUpErrorType = "draautoscaler.provider.v1.ScaleUpError"
)

// gpuVendorResources is cluster-autoscaler's gpu.GPUVendorResourceNames: the extended
// resources its readiness check accepts as "the GPU is ready".
var gpuVendorResources = []corev1.ResourceName{
	"nvidia.com/gpu", "habana.ai/gaudi", "gpu.intel.com/xe", "amd.com/gpu", "microsoft.com/directx",
}

type peer struct {
	conn *grpc.ClientConn
	// master is upstream's externalgrpc.proto as on kubernetes/autoscaler master (55c37cd5).
	master *protoregistry.Files
	// next is master plus the fields of the open pull requests kubernetes/autoscaler#10303
	// (NodeGroupTemplateNodeInfoResponse.resourceSliceBytes = 3) and #10266
	// (NodeGroupAutoscalingOptions.maxNodeStartupDuration = 11, allowNonAtomicScaleUpToMax = 12).
	next *protoregistry.Files
}

func connect(t *testing.T) *peer {
	t.Helper()
	addr, descriptors := os.Getenv("EXTERNALGRPC_ADDR"), os.Getenv("EXTERNALGRPC_DESCRIPTORS")
	if addr == "" || descriptors == "" {
		t.Skip("EXTERNALGRPC_ADDR or EXTERNALGRPC_DESCRIPTORS unset: run `cargo test -p dra-provider --test upstream_client`")
	}
	raw, err := os.ReadFile(descriptors)
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(raw, set); err != nil {
		t.Fatal(err)
	}
	master, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatal(err)
	}
	withPRs := proto.Clone(set).(*descriptorpb.FileDescriptorSet)
	addField(t, withPRs, "NodeGroupTemplateNodeInfoResponse", "resourceSliceBytes", 3,
		descriptorpb.FieldDescriptorProto_LABEL_REPEATED, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "")
	addField(t, withPRs, "NodeGroupAutoscalingOptions", "maxNodeStartupDuration", 11,
		descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.Duration")
	addField(t, withPRs, "NodeGroupAutoscalingOptions", "allowNonAtomicScaleUpToMax", 12,
		descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_TYPE_BOOL, "")
	next, err := protodesc.NewFiles(withPRs)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &peer{conn: conn, master: master, next: next}
}

func addField(t *testing.T, set *descriptorpb.FileDescriptorSet, message, name string, number int32,
	label descriptorpb.FieldDescriptorProto_Label, kind descriptorpb.FieldDescriptorProto_Type, typeName string) {
	t.Helper()
	for _, file := range set.File {
		if file.GetPackage()+"." != pkg {
			continue
		}
		for _, m := range file.MessageType {
			if m.GetName() != message {
				continue
			}
			field := &descriptorpb.FieldDescriptorProto{
				Name: proto.String(name), JsonName: proto.String(name), Number: proto.Int32(number),
				Label: label.Enum(), Type: kind.Enum(),
			}
			if typeName != "" {
				field.TypeName = proto.String(typeName)
			}
			m.Field = append(m.Field, field)
			return
		}
	}
	t.Fatalf("message %s not in the descriptors", message)
}

func newMessage(t *testing.T, files *protoregistry.Files, fullName string) *dynamicpb.Message {
	t.Helper()
	d, err := files.FindDescriptorByName(protoreflect.FullName(fullName))
	if err != nil {
		t.Fatalf("%s: %v", fullName, err)
	}
	return dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return fd
}

func get(m protoreflect.Message, name string) protoreflect.Value { return m.Get(field(m, name)) }
func has(m protoreflect.Message, name string) bool               { return m.Has(field(m, name)) }

// call sends request (fields set from values) and returns the response or the error.
func (p *peer) call(t *testing.T, files *protoregistry.Files, method string, values map[string]any) (*dynamicpb.Message, error) {
	t.Helper()
	fd := p.methodDescriptor(t, files, method)
	req := dynamicpb.NewMessage(fd.Input())
	for name, value := range values {
		req.Set(field(req, name), protoreflect.ValueOf(value))
	}
	resp := dynamicpb.NewMessage(fd.Output())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.conn.Invoke(ctx, service+method, req, resp)
	return resp, err
}

func (p *peer) methodDescriptor(t *testing.T, files *protoregistry.Files, method string) protoreflect.MethodDescriptor {
	t.Helper()
	d, err := files.FindDescriptorByName(protoreflect.FullName(pkg + "CloudProvider"))
	if err != nil {
		t.Fatal(err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if m == nil {
		t.Fatalf("no method %s", method)
	}
	return m
}

// mustCall is call that fails the test on an error.
func (p *peer) mustCall(t *testing.T, files *protoregistry.Files, method string, values map[string]any) *dynamicpb.Message {
	t.Helper()
	resp, err := p.call(t, files, method, values)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// A google.protobuf.Duration as the dynamic message the schema holds, and back.
func newDuration(t *testing.T, files *protoregistry.Files, d time.Duration) protoreflect.Message {
	m := newMessage(t, files, "google.protobuf.Duration")
	m.Set(field(m, "seconds"), protoreflect.ValueOfInt64(int64(d/time.Second)))
	m.Set(field(m, "nanos"), protoreflect.ValueOfInt32(int32(d%time.Second)))
	return m
}

func durationOf(m protoreflect.Message) (seconds int64, nanos int32) {
	return get(m, "seconds").Int(), int32(get(m, "nanos").Int())
}

// TestScaleUpErrorsReachGrpcGoAsSent: grpc-go parses grpc-status-details-bin as a
// google.rpc.Status and, when its code differs from grpc-status, replaces the whole status by
// INTERNAL "grpc-status-details-bin mismatch" (internal/status.NewWithProto); when the codes
// agree it takes code, message and details from that Status. So the code, the message and the
// ScaleUpError detail seen here are exactly what cluster-autoscaler's client sees.
func TestScaleUpErrorsReachGrpcGoAsSent(t *testing.T) {
	p := connect(t)
	cases := []struct {
		group        string
		code         codes.Code
		message      string
		class        protoreflect.EnumNumber
		errorCode    string
		errorMessage string
		rolledBack   int32
		notStarted   bool
	}{
		{"stockout", codes.ResourceExhausted, "out of capacity: no p5.48xlarge in us-east-1a", 1,
			"InsufficientInstanceCapacity", "no p5.48xlarge in us-east-1a", 2, false},
		{"quota", codes.ResourceExhausted, "quota exceeded: GPUS_ALL_REGIONS is 8", 2,
			"QUOTA_EXCEEDED", "GPUS_ALL_REGIONS is 8", 0, false},
		{"throttled", codes.Unavailable, "nothing started: RequestLimitExceeded before any instance", 0,
			"", "RequestLimitExceeded before any instance", 0, true},
	}
	for _, c := range cases {
		t.Run(c.group, func(t *testing.T) {
			_, err := p.call(t, p.master, "NodeGroupIncreaseSize", map[string]any{"id": c.group, "delta": int32(1)})
			st, ok := status.FromError(err)
			if !ok || err == nil {
				t.Fatalf("want a gRPC status, got %v", err)
			}
			if st.Code() != c.code || st.Message() != c.message {
				t.Fatalf("status %v %q, want %v %q", st.Code(), st.Message(), c.code, c.message)
			}
			details := st.Proto().GetDetails()
			if len(details) != 1 {
				t.Fatalf("want one detail, got %d", len(details))
			}
			if got := details[0].GetTypeUrl(); got != "type.googleapis.com/"+scaleUpErrorType {
				t.Fatalf("detail type URL %q", got)
			}
			detail := newMessage(t, p.master, scaleUpErrorType)
			if err := proto.Unmarshal(details[0].GetValue(), detail); err != nil {
				t.Fatal(err)
			}
			if got := get(detail, "errorClass").Enum(); got != c.class {
				t.Errorf("errorClass %d, want %d", got, c.class)
			}
			if got := get(detail, "errorCode").String(); got != c.errorCode {
				t.Errorf("errorCode %q, want %q", got, c.errorCode)
			}
			if got := get(detail, "errorMessage").String(); got != c.errorMessage {
				t.Errorf("errorMessage %q, want %q", got, c.errorMessage)
			}
			if got := int32(get(detail, "rolledBack").Int()); got != c.rolledBack {
				t.Errorf("rolledBack %d, want %d", got, c.rolledBack)
			}
			if got := get(detail, "notStarted").Bool(); got != c.notStarted {
				t.Errorf("notStarted %v, want %v", got, c.notStarted)
			}
		})
	}
}

func readSlices(t *testing.T) []resourcev1.ResourceSlice {
	t.Helper()
	path := os.Getenv("EXTERNALGRPC_SLICES")
	if path == "" {
		t.Skip("EXTERNALGRPC_SLICES unset")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var slices []resourcev1.ResourceSlice
	for {
		var slice resourcev1.ResourceSlice
		if err := decoder.Decode(&slice); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// Marshal() writes no TypeMeta: a decoded object has none.
		slice.TypeMeta = resourcev1.ResourceSlice{}.TypeMeta
		slices = append(slices, slice)
	}
	return slices
}

// TestTemplateNodeInfoCarriesTheTemplateSlices: one Go-Marshal()ed ResourceSlice per
// resourceSliceBytes entry (kubernetes/autoscaler#10303), which cluster-autoscaler
// Unmarshal()s into the template NodeInfo.
func TestTemplateNodeInfoCarriesTheTemplateSlices(t *testing.T) {
	p := connect(t)
	want := readSlices(t)
	resp := p.mustCall(t, p.next, "NodeGroupTemplateNodeInfo", map[string]any{"id": "gpu"})

	node := &corev1.Node{}
	if err := node.Unmarshal(get(resp, "nodeBytes").Bytes()); err != nil {
		t.Fatal(err)
	}
	if node.Name != "gpu-template" || node.Labels["dra-autoscaler.io/node-group"] != "gpu" {
		t.Errorf("template node %q labels %v", node.Name, node.Labels)
	}

	list := get(resp, "resourceSliceBytes").List()
	if list.Len() != len(want) {
		t.Fatalf("%d slices, want %d", list.Len(), len(want))
	}
	for i := range want {
		raw := list.Get(i).Bytes()
		got := &resourcev1.ResourceSlice{}
		if err := got.Unmarshal(raw); err != nil {
			t.Fatalf("slice %d: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(&want[i], got) {
			t.Errorf("slice %d decodes to\n%v\nwant\n%v", i, got, &want[i])
		}
		goBytes, err := want[i].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, goBytes) {
			t.Errorf("slice %d: bytes differ from Go's Marshal()\n ours %x\n   go %x", i, raw, goBytes)
		}
	}

	// A cluster-autoscaler built from master (no field 3) reads the same answer: the slices
	// are an unknown field it skips, the node is where it looks.
	wire, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	old := newMessage(t, p.master, pkg+"NodeGroupTemplateNodeInfoResponse")
	if err := proto.Unmarshal(wire, old); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(get(old, "nodeBytes").Bytes(), get(resp, "nodeBytes").Bytes()) || len(old.GetUnknown()) == 0 {
		t.Errorf("master schema: nodeBytes changed or slices not kept as unknown")
	}
}

// TestGetOptionsAnswersFromTheNodeGroupSpec: cluster-autoscaler replaces its defaults by the
// answer as a whole and reads an absent duration as 0 (externalgrpc_node_group.go GetOptions),
// and reads an absent answer as "use the defaults".
func TestGetOptionsAnswersFromTheNodeGroupSpec(t *testing.T) {
	p := connect(t)
	defaults := func(files *protoregistry.Files, withStartup bool) protoreflect.Message {
		m := newMessage(t, files, pkg+"NodeGroupAutoscalingOptions")
		m.Set(field(m, "scaleDownUtilizationThreshold"), protoreflect.ValueOfFloat64(0.5))
		m.Set(field(m, "scaleDownGpuUtilizationThreshold"), protoreflect.ValueOfFloat64(0.5))
		m.Set(field(m, "scaleDownUnneededDuration"), protoreflect.ValueOfMessage(newDuration(t, files, 10*time.Minute)))
		m.Set(field(m, "scaleDownUnreadyDuration"), protoreflect.ValueOfMessage(newDuration(t, files, 20*time.Minute)))
		m.Set(field(m, "MaxNodeProvisionDuration"), protoreflect.ValueOfMessage(newDuration(t, files, 15*time.Minute)))
		if withStartup {
			m.Set(field(m, "maxNodeStartupDuration"), protoreflect.ValueOfMessage(newDuration(t, files, 15*time.Minute)))
		}
		return m
	}
	options := func(files *protoregistry.Files, group string, withStartup bool) (protoreflect.Message, bool) {
		resp := p.mustCall(t, files, "NodeGroupGetOptions", map[string]any{
			"id": group, "defaults": defaults(files, withStartup),
		})
		if !has(resp, "nodeGroupAutoscalingOptions") {
			return nil, false
		}
		return get(resp, "nodeGroupAutoscalingOptions").Message(), true
	}
	wantDuration := func(m protoreflect.Message, name string, want time.Duration) {
		t.Helper()
		if !has(m, name) {
			t.Errorf("%s absent: cluster-autoscaler would read 0", name)
			return
		}
		seconds, nanos := durationOf(get(m, name).Message())
		if got := time.Duration(seconds)*time.Second + time.Duration(nanos); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// spec.scaleDown {utilizationThreshold: 0.3, unneededTime: 20m}
	for _, withStartup := range []bool{false, true} {
		files := p.master
		if withStartup {
			files = p.next
		}
		got, ok := options(files, "tuned", withStartup)
		if !ok {
			t.Fatal("tuned: no options")
		}
		if get(got, "scaleDownUtilizationThreshold").Float() != 0.3 || get(got, "scaleDownGpuUtilizationThreshold").Float() != 0.3 {
			t.Errorf("tuned thresholds %v %v", get(got, "scaleDownUtilizationThreshold"), get(got, "scaleDownGpuUtilizationThreshold"))
		}
		wantDuration(got, "scaleDownUnneededDuration", 20*time.Minute)
		wantDuration(got, "scaleDownUnreadyDuration", 20*time.Minute)
		wantDuration(got, "MaxNodeProvisionDuration", 15*time.Minute)
		if get(got, "zeroOrMaxNodeScaling").Bool() || get(got, "ignoreDaemonSetsUtilization").Bool() {
			t.Error("tuned: switches the defaults leave off are on")
		}
		if withStartup {
			wantDuration(got, "maxNodeStartupDuration", 15*time.Minute)
		}
	}

	// No spec.scaleDown: no answer, so cluster-autoscaler keeps all its defaults.
	if _, ok := options(p.master, "plain", false); ok {
		t.Error("plain: options sent for a group that sets none")
	}

	// spec.scaleDown.enabled: false: a node never stays unneeded or unready that long.
	got, ok := options(p.master, "frozen", false)
	if !ok {
		t.Fatal("frozen: no options")
	}
	never := 100 * 365 * 24 * time.Hour
	wantDuration(got, "scaleDownUnneededDuration", never)
	wantDuration(got, "scaleDownUnreadyDuration", never)

	_, err := p.call(t, p.master, "NodeGroupGetOptions", map[string]any{"id": "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown group: %v", err)
	}
}

// TestGPUAnswersAgreeWithTheTemplates: cluster-autoscaler's GpuCustomResourcesProcessor holds a
// node that carries GPULabel() and has no GPU vendor resource in allocatable as unready
// (externalgrpc never marks GPUs as DRA-exposed), and compares the label's value with
// GetAvailableGPUTypes() keys.
func TestGPUAnswersAgreeWithTheTemplates(t *testing.T) {
	p := connect(t)
	label := get(p.mustCall(t, p.master, "GPULabel", nil), "label").String()
	typesMap := get(p.mustCall(t, p.master, "GetAvailableGPUTypes", nil), "gpuTypes").Map()
	var types []string
	typesMap.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		types = append(types, k.String())
		return true
	})
	sort.Strings(types)

	// "gpu" has DRA-only GPUs and the usual product label; "plugin" has nvidia.com/gpu.
	if label == "nvidia.com/gpu.product" || label == "" {
		t.Fatalf("GPULabel %q would hold the DRA-only template as GPU-unready", label)
	}
	for _, group := range []string{"gpu", "plugin", "tuned"} {
		resp := p.mustCall(t, p.master, "NodeGroupTemplateNodeInfo", map[string]any{"id": group})
		node := &corev1.Node{}
		if err := node.Unmarshal(get(resp, "nodeBytes").Bytes()); err != nil {
			t.Fatal(err)
		}
		value, labelled := node.Labels[label]
		hasGPU := false
		for _, name := range gpuVendorResources {
			if q, ok := node.Status.Allocatable[name]; ok && !q.IsZero() {
				hasGPU = true
			}
		}
		if labelled && !hasGPU {
			t.Errorf("%s: cluster-autoscaler would hold this template's nodes as GPU-unready", group)
		}
		if labelled && sort.SearchStrings(types, value) == len(types) {
			t.Errorf("%s: GPU type %q not in GetAvailableGPUTypes %v", group, value, types)
		}
	}
}
