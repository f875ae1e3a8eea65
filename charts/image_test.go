package charts

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDockerfile checks what the images promise, since no Docker engine runs here: binaries from
// `make build` built with CGO_ENABLED=0, one non-root distroless stage per component, each running
// its own binary. The lab test builds the same way and checks the binaries are static.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	type stage struct{ from, user, entrypoint, copy string }
	stages := map[string]*stage{}
	var cur *stage
	var build []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			cur = &stage{from: f[1]}
			stages[f[len(f)-1]] = cur
		case "USER":
			cur.user = f[1]
		case "ENTRYPOINT":
			cur.entrypoint = strings.Join(f[1:], " ")
		case "COPY":
			cur.copy = strings.Join(f[1:], " ")
		case "ENV", "RUN":
			if cur == stages["build"] {
				build = append(build, line)
			}
		}
	}
	if !strings.Contains(string(raw), "ARG BASE_IMAGE=gcr.io/distroless/static:nonroot") {
		t.Errorf("the final images must use a distroless static non-root base")
	}
	if diff := cmp.Diff([]string{"ENV CGO_ENABLED=0 GOFLAGS=-trimpath", "RUN go mod download", "RUN make build BIN=/out"}, build); diff != "" {
		t.Errorf("build stage (-want +got):\n%s", diff)
	}
	want := map[string]*stage{
		"build":          {from: "${GO_IMAGE}", copy: ". ."},
		"fleetq-manager": {from: "${BASE_IMAGE}", user: "65532:65532", entrypoint: `["/fleetq-manager"]`, copy: "--from=build /out/fleetq-manager /fleetq-manager"},
		"fleetq-agent":   {from: "${BASE_IMAGE}", user: "65532:65532", entrypoint: `["/fleetq-agent"]`, copy: "--from=build /out/fleetq-agent /fleetq-agent"},
	}
	if diff := cmp.Diff(want, stages, cmp.AllowUnexported(stage{})); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
}
