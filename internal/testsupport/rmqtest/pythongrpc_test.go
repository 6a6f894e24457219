package rmqtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonClientMissingFailsWithWhatToDo checks that without a usable DETOUR_PYTHON_CLIENT the
// harness gives up (it does not skip) with a message naming the setup script.
func TestPythonClientMissingFailsWithWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name, dir, want string
	}{
		{name: "unset", dir: "", want: "hack/setup-python-client.sh"},
		{name: "a folder the script did not complete", dir: t.TempDir(), want: "is not a folder hack/setup-python-client.sh completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPythonClient, tc.dir)
			var r Runner
			defer r.Close()
			err := Run(func() { LocatePythonClient(&r) })
			if err == nil || !r.Failed() || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LocatePythonClient with %s=%q: err %v, want one saying %q", EnvPythonClient, tc.dir, err, tc.want)
			}
		})
	}
}

// TestPythonLogIsReadForProblemsHeartbeatsAndRoutes checks what a run reports from the Python
// client's log: every WARNING, ERROR and CRITICAL line, the heartbeats answered OK and the route
// answers for the run's topic only.
func TestPythonLogIsReadForProblemsHeartbeatsAndRoutes(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		lines                 []string
		problems, beats, rout int
	}{
		{name: "healthy session", lines: []string{
			"2026-12-03 11:56:33,679 [INFO] PRODUCER client_id:x start success.",
			"2026-12-03 11:56:33,680 [INFO] PRODUCER client_id:x update topic:T route, route info: {...}",
			"2026-12-03 11:56:34,680 [INFO] PRODUCER client_id:x send heartbeat to 127.0.0.1:1 success.",
			"2026-12-03 11:56:43,680 [INFO] PRODUCER client_id:x update topic:T route, route info: {...}",
			"2026-12-03 11:56:44,680 [INFO] PRODUCER client_id:x send heartbeat to 127.0.0.1:1 success.",
		}, beats: 2, rout: 2},
		{name: "failures", lines: []string{
			"2026-12-03 11:56:33,679 [ERROR] query topic raise exception, <AioRpcError of RPC that terminated with:",
			"\tdetails = \"CERTIFICATE_VERIFY_FAILED\"",
			"2026-12-03 11:56:34,680 [ERROR] PRODUCER client_id:x send heartbeat to 127.0.0.1:1 error, code:40000, message:bad.",
			"2026-12-03 11:56:35,680 [WARNING] PRODUCER client_id:x send setting to 127.0.0.1:1 occurred AioRpcError: x",
		}, problems: 3},
		{name: "another topic's routes", lines: []string{
			"2026-12-03 11:56:33,680 [INFO] PRODUCER client_id:x update topic:TOther route, route info: {...}",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rocketmq_client.log")
			if err := os.WriteFile(file, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var run PythonGRPCRun
			readPythonLog(file, "T", &run)
			if len(run.Problems) != tc.problems || run.Heartbeats != tc.beats || run.Routes != tc.rout {
				t.Fatalf("read %d problems %q, %d heartbeats, %d routes; want %d, %d, %d",
					len(run.Problems), run.Problems, run.Heartbeats, run.Routes, tc.problems, tc.beats, tc.rout)
			}
		})
	}
}
