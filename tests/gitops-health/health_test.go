package gitopshealth

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The script Argo CD runs: the one the chart ships.
const script = "../../charts/dcs-operator/health.lua"

// TestLuaHealthScript is Argo CD's harness (util/lua health_test.go TestLuaHealthScript) on our
// script and fixtures: every test of health_test.yaml, its inputPath judged by the script, the
// result equal to healthStatus. Run as a script pasted into argocd-cm gets it (no open libraries)
// and as Argo CD's built-in scripts get it (open libraries).
func TestLuaHealthScript(t *testing.T) {
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	tests := expectations(t)
	for _, test := range tests {
		for _, openLibs := range []bool{false, true} {
			name := test.InputPath
			if openLibs {
				name += "/useOpenLibs"
			}
			t.Run(name, func(t *testing.T) {
				obj, err := ReadObject(test.InputPath)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ArgoCDHealth(obj, string(src), openLibs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, test.HealthStatus) {
					t.Errorf("health %+v, want %+v", got, test.HealthStatus)
				}
			})
		}
	}
}

// TestKstatus: kstatus's status.Compute on the same fixtures.
func TestKstatus(t *testing.T) {
	for _, test := range expectations(t) {
		t.Run(test.InputPath, func(t *testing.T) {
			obj, err := ReadObject(test.InputPath)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Kstatus(obj)
			if err != nil {
				t.Fatal(err)
			}
			if *got != test.Kstatus {
				t.Errorf("kstatus %+v, want %+v", *got, test.Kstatus)
			}
		})
	}
}

// Every fixture is tested, and every state the README describes has one.
func TestEveryFixtureIsTested(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, test := range expectations(t) {
		tested[test.InputPath] = true
	}
	for _, f := range files {
		if !tested[f] {
			t.Errorf("%s is in no test of health_test.yaml", f)
		}
	}
	for _, state := range []string{"streaming", "snapshotting", "snapshot-done", "blocked", "failed", "suspended"} {
		if !tested["testdata/"+state+".yaml"] {
			t.Errorf("no test for the %s fixture", state)
		}
	}
}

func expectations(t *testing.T) []Expectation {
	t.Helper()
	tests, err := Expectations("health_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("health_test.yaml has no tests")
	}
	return tests
}

// A spec the operator has not yet answered: whatever the status said, both tools wait.
func TestAStatusOlderThanTheSpecIsInProgress(t *testing.T) {
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, test := range expectations(t) {
		t.Run(test.InputPath, func(t *testing.T) {
			obj, err := ReadObject(test.InputPath)
			if err != nil {
				t.Fatal(err)
			}
			obj.SetGeneration(obj.GetGeneration() + 1)
			want := &HealthStatus{Status: "Progressing", Message: fmt.Sprintf("waiting for the dcs operator to observe generation %d", obj.GetGeneration())}
			for _, openLibs := range []bool{false, true} {
				got, err := ArgoCDHealth(obj, string(src), openLibs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("useOpenLibs %v: health %+v, want %+v", openLibs, got, want)
				}
			}
			ks, err := Kstatus(obj)
			if err != nil {
				t.Fatal(err)
			}
			wantKs := KstatusResult{Status: "InProgress", Message: fmt.Sprintf("DorisChangelogSync generation is %d, but latest observed generation is %d", obj.GetGeneration(), obj.GetGeneration()-1)}
			if *ks != wantKs {
				t.Errorf("kstatus %+v, want %+v", *ks, wantKs)
			}
		})
	}
}

// A sync the operator has not written a status for yet: Argo CD waits. kstatus cannot tell it
// from a resource without conditions and calls it Current (its documented limit for custom
// resources); the README says so.
func TestASyncWithoutStatus(t *testing.T) {
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := ReadObject("testdata/streaming.yaml")
	if err != nil {
		t.Fatal(err)
	}
	delete(obj.Object, "status")
	got, err := ArgoCDHealth(obj, string(src), false)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&HealthStatus{Status: "Progressing", Message: "waiting for the dcs operator's first status"}); !reflect.DeepEqual(got, want) {
		t.Errorf("health %+v, want %+v", got, want)
	}
	ks, err := Kstatus(obj)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Status != "Current" {
		t.Errorf("kstatus %+v: kstatus's rule for a resource without status changed, update the README", *ks)
	}
}

// The harness refuses what Argo CD refuses: a script using the string library without
// useOpenLibs fails, and an unknown health code becomes Unknown.
func TestTheHarnessKeepsArgoCDsContract(t *testing.T) {
	obj, err := ReadObject("testdata/streaming.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const usesString = `return {status = string.upper("h") .. "ealthy"}`
	if _, err := ArgoCDHealth(obj, usesString, false); err == nil {
		t.Error("the string library was available without useOpenLibs")
	}
	got, err := ArgoCDHealth(obj, usesString, true)
	if err != nil || !reflect.DeepEqual(got, &HealthStatus{Status: "Healthy"}) {
		t.Errorf("with useOpenLibs: %+v, %v", got, err)
	}
	got, err = ArgoCDHealth(obj, `return {status = "Fine"}`, false)
	if err != nil || !reflect.DeepEqual(got, &HealthStatus{Status: "Unknown", Message: invalidHealthStatus}) {
		t.Errorf("an invalid code: %+v, %v", got, err)
	}
}

// States no e2e scenario holds long enough to capture, derived from live fixtures by the rule
// operator/src/reconcile/status.rs applies (kstatus_condition, unit-tested there), and statuses
// of operators from before the Reconciling and Stalled conditions, which the script still judges
// by phase and Ready.
func TestDerivedStates(t *testing.T) {
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
	}
	crash := "the runner restarted 5 times; last error: Stream Load failed"
	reinit := "the offset expired; starting again as consumer s1-r1"
	for _, c := range []struct {
		name, from, phase string
		// Conditions replaced or added by type; a nil entry removes that type.
		set     map[string]map[string]any
		argo    HealthStatus
		kstatus string
	}{
		{"a crash-looping runner", "testdata/streaming.yaml", "Streaming", map[string]map[string]any{
			"Ready":   cond("Ready", "False", "RunnerFailed", crash),
			"Stalled": cond("Stalled", "True", "RunnerFailed", crash),
		}, HealthStatus{"Degraded", "RunnerFailed: " + crash}, "Failed"},
		{"a re-initialisation", "testdata/streaming.yaml", "Reinitializing", map[string]map[string]any{
			"Ready":       cond("Ready", "False", "Reinitializing", reinit),
			"Reconciling": cond("Reconciling", "True", "Reinitializing", reinit),
		}, HealthStatus{"Progressing", "Reinitializing: " + reinit}, "InProgress"},
		{"a runner starting", "testdata/streaming.yaml", "Pending", map[string]map[string]any{
			"Ready":       cond("Ready", "False", "RunnerStarting", "waiting for the runner's first checkpoint"),
			"Reconciling": cond("Reconciling", "True", "RunnerStarting", "waiting for the runner's first checkpoint"),
		}, HealthStatus{"Progressing", "RunnerStarting: waiting for the runner's first checkpoint"}, "InProgress"},
		{"Blocked from an operator without Stalled", "testdata/blocked.yaml", "Blocked", map[string]map[string]any{
			"Stalled": nil,
		}, HealthStatus{"Degraded", "TtlTooShort: " + firstMessage(t, "testdata/blocked.yaml")}, "InProgress"},
		{"Snapshotting from an operator without Reconciling", "testdata/snapshotting.yaml", "Snapshotting", map[string]map[string]any{
			"Reconciling": nil,
		}, HealthStatus{"Progressing", "Snapshotting: reading the snapshot"}, "Current"},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj, err := ReadObject(c.from)
			if err != nil {
				t.Fatal(err)
			}
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			out := []any{}
			for _, raw := range conds {
				typ := raw.(map[string]any)["type"].(string)
				if _, replaced := c.set[typ]; !replaced {
					out = append(out, raw)
				}
			}
			for _, added := range c.set {
				if added != nil {
					out = append(out, added)
				}
			}
			if err := unstructured.SetNestedSlice(obj.Object, out, "status", "conditions"); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedField(obj.Object, c.phase, "status", "phase"); err != nil {
				t.Fatal(err)
			}
			got, err := ArgoCDHealth(obj, string(src), false)
			if err != nil {
				t.Fatal(err)
			}
			if *got != c.argo {
				t.Errorf("health %+v, want %+v", *got, c.argo)
			}
			ks, err := Kstatus(obj)
			if err != nil {
				t.Fatal(err)
			}
			if ks.Status != c.kstatus {
				t.Errorf("kstatus %+v, want %s", *ks, c.kstatus)
			}
		})
	}
}

// firstMessage is the Ready message of a fixture.
func firstMessage(t *testing.T, path string) string {
	t.Helper()
	obj, err := ReadObject(path)
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, raw := range conds {
		if m := raw.(map[string]any); m["type"] == "Ready" {
			return m["message"].(string)
		}
	}
	t.Fatalf("%s has no Ready condition", path)
	return ""
}
