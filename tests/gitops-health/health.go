// Package gitopshealth judges a DorisChangelogSync the way the GitOps tools do: Argo CD's health
// check (charts/dcs-operator/health.lua run under Argo CD's Lua contract, replicated from its
// util/lua on gopher-lua, the interpreter it embeds) and kstatus (sigs.k8s.io/cli-utils's
// status.Compute, which Flux's health checks and kstatus-based waits use).
//
// Argo CD's own module (github.com/argoproj/argo-cd/v3) cannot be built as a dependency here: its
// newest release needs a newer Go than the project's, and the earlier ones import
// github.com/argoproj/argo-cd/gitops-engine at a version the Go module proxy does not serve (Argo
// CD builds it from its own repository through a replace directive). So ArgoCDHealth reproduces
// util/lua's VM.ExecuteHealthLua step by step; each step names what it mirrors.
package gitopshealth

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// HealthStatus is Argo CD's health.HealthStatus (gitops-engine pkg/health), as its tests compare it.
type HealthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// The health codes Argo CD accepts from a script (util/lua isValidHealthStatusCode).
var validHealthCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

// Argo CD's answer to a script returning a code outside validHealthCodes (util/lua invalidHealthStatus).
const invalidHealthStatus = "Lua returned an invalid health status"

// ArgoCDHealth runs a health.lua script on obj as Argo CD does (util/lua VM.ExecuteHealthLua with
// runLua). openLibs is Argo CD's resource.customizations.useOpenLibs.<group>_<kind> setting: false
// by default for a script in argocd-cm, which then gets only the package, base and table libraries
// and a reduced os library (no string, no math); Argo CD's own built-in scripts run with true.
func ArgoCDHealth(obj *unstructured.Unstructured, script string, openLibs bool) (*HealthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	// runLua opens these three whatever useOpenLibs says. It also opens its "safe" os library
	// (os.time, os.date, ...); it is left out here, so a script relying on it fails this harness.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	// runLua: one second per run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", decodeValue(l, obj.Object))
	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	if err != nil {
		return nil, err
	}
	// ExecuteHealthLua: a table, read through JSON into HealthStatus; nil means no health.
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return nil, nil
	case lua.LTTable:
	default:
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	raw, err := json.Marshal(luaToGo(ret))
	if err != nil {
		return nil, err
	}
	hs := &HealthStatus{}
	if err := json.Unmarshal(raw, hs); err != nil {
		return nil, fmt.Errorf("the script returned %s: %w", raw, err)
	}
	if !validHealthCodes[hs.Status] {
		return &HealthStatus{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return hs, nil
}

// decodeValue is util/lua's decodeValue: the object as Lua tables (arrays 1-based), numbers as
// Lua numbers.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}

// luaToGo converts a returned table the way Argo CD's JSON encoder of Lua values (layeh.com/gopher-json)
// does for the shapes a health script returns: string keys make an object, values as they are.
func luaToGo(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return float64(x)
	case lua.LBool:
		return bool(x)
	case *lua.LTable:
		if x.MaxN() > 0 {
			arr := []any{}
			x.ForEach(func(_, item lua.LValue) { arr = append(arr, luaToGo(item)) })
			return arr
		}
		m := map[string]any{}
		x.ForEach(func(k, item lua.LValue) { m[k.String()] = luaToGo(item) })
		return m
	}
	return nil
}

// KstatusResult is what status.Compute says, as the fixtures' expectations write it.
type KstatusResult struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Kstatus runs kstatus's status.Compute on obj.
func Kstatus(obj *unstructured.Unstructured) (*KstatusResult, error) {
	res, err := status.Compute(obj)
	if err != nil {
		return nil, err
	}
	return &KstatusResult{Status: res.Status.String(), Message: res.Message}, nil
}

// Expectation is one entry of health_test.yaml: Argo CD's format (inputPath, healthStatus), which
// its harness reads ignoring the rest, plus what kstatus must compute for the same object.
type Expectation struct {
	InputPath    string        `json:"inputPath"`
	HealthStatus *HealthStatus `json:"healthStatus"`
	Kstatus      KstatusResult `json:"kstatus"`
}

// Expectations reads a health_test.yaml.
func Expectations(path string) ([]Expectation, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Tests []Expectation `json:"tests"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return file.Tests, nil
}

// ReadObject reads a YAML or JSON object as the API server's JSON decoding gives it (integers as
// int64, which kstatus's generation checks require, as Argo CD's controller sees them too).
func ReadObject(path string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// Signature is what a fixture must share with the live object of the same state: the phase, the
// status and reason of the conditions the health judgements read (Ready, Reconciling, Stalled),
// and which other conditions there are. Messages, times and the explaining conditions' reasons
// (SinkHealthy's first load, say) vary from run to run.
func Signature(obj *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	parts := []string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case "Ready", "Reconciling", "Stalled":
			parts = append(parts, fmt.Sprintf("%v=%v(%v)", m["type"], m["status"], m["reason"]))
		default:
			parts = append(parts, fmt.Sprint(m["type"]))
		}
	}
	sort.Strings(parts)
	return fmt.Sprintf("phase %s; %s", phase, strings.Join(parts, ", "))
}

// Fixture strips what changes with every object and says nothing about health: uid,
// resourceVersion, managedFields, creationTimestamp, annotations (kubectl's last-applied copy).
func Fixture(obj *unstructured.Unstructured) ([]byte, error) {
	out := obj.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "managedFields", "creationTimestamp", "annotations", "finalizers"} {
		unstructured.RemoveNestedField(out.Object, "metadata", f)
	}
	return yaml.Marshal(out.Object)
}
