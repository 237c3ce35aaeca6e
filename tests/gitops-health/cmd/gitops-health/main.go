// gitops-health judges a live DorisChangelogSync as Argo CD's health check and kstatus do, for the
// e2e suite (e2e/lib.sh gitops_check):
//
//	gitops-health check -script health.lua -tests health_test.yaml -input testdata/STATE.yaml LIVE.json
//	    LIVE (kubectl get dcs -o json) must get the Argo CD health and kstatus status that
//	    health_test.yaml expects for INPUT, and share INPUT's phase and conditions (type, status,
//	    reason), so the committed fixture still is what the operator writes.
//	gitops-health fixture LIVE.json OUT.yaml
//	    writes LIVE as a fixture (without uid, resourceVersion, managedFields, ...).
package main

import (
	"flag"
	"fmt"
	"os"

	gitopshealth "dcs.dev/tests/gitops-health"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = check(os.Args[2:])
	case "fixture":
		err = fixture(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gitops-health: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gitops-health check -script FILE -tests FILE -input PATH LIVE | gitops-health fixture LIVE OUT")
	os.Exit(2)
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	script := fs.String("script", "", "the health.lua")
	tests := fs.String("tests", "", "the health_test.yaml")
	input := fs.String("input", "", "the fixture's inputPath in health_test.yaml")
	_ = fs.Parse(args)
	if fs.NArg() != 1 || *script == "" || *tests == "" || *input == "" {
		usage()
	}
	src, err := os.ReadFile(*script)
	if err != nil {
		return err
	}
	expectations, err := gitopshealth.Expectations(*tests)
	if err != nil {
		return err
	}
	var want *gitopshealth.Expectation
	for i := range expectations {
		if expectations[i].InputPath == *input {
			want = &expectations[i]
		}
	}
	if want == nil {
		return fmt.Errorf("%s has no test with inputPath %s", *tests, *input)
	}
	live, err := gitopshealth.ReadObject(fs.Arg(0))
	if err != nil {
		return err
	}
	fixture, err := gitopshealth.ReadObject(want.InputPath)
	if err != nil {
		return fmt.Errorf("%w (write it with E2E_WRITE_GITOPS_FIXTURES=1 e2e/run.sh)", err)
	}
	if got, fix := gitopshealth.Signature(live), gitopshealth.Signature(fixture); got != fix {
		return fmt.Errorf("the live object no longer matches %s (rewrite it with E2E_WRITE_GITOPS_FIXTURES=1 e2e/run.sh):\n  live:    %s\n  fixture: %s", want.InputPath, got, fix)
	}
	for _, openLibs := range []bool{false, true} {
		hs, err := gitopshealth.ArgoCDHealth(live, string(src), openLibs)
		if err != nil {
			return fmt.Errorf("Argo CD health check (useOpenLibs %v): %w", openLibs, err)
		}
		if hs == nil || hs.Status != want.HealthStatus.Status {
			return fmt.Errorf("Argo CD health (useOpenLibs %v) is %+v, %s expects %s", openLibs, hs, *tests, want.HealthStatus.Status)
		}
	}
	ks, err := gitopshealth.Kstatus(live)
	if err != nil {
		return fmt.Errorf("kstatus: %w", err)
	}
	if ks.Status != want.Kstatus.Status {
		return fmt.Errorf("kstatus computes %s (%s), %s expects %s", ks.Status, ks.Message, *tests, want.Kstatus.Status)
	}
	fmt.Printf("%s: Argo CD %s, kstatus %s, %s\n", want.InputPath, want.HealthStatus.Status, ks.Status, gitopshealth.Signature(live))
	return nil
}

func fixture(args []string) error {
	if len(args) != 2 {
		usage()
	}
	live, err := gitopshealth.ReadObject(args[0])
	if err != nil {
		return err
	}
	out, err := gitopshealth.Fixture(live)
	if err != nil {
		return err
	}
	return os.WriteFile(args[1], out, 0o644)
}
