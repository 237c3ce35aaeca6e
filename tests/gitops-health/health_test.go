package gitopshealth

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
