package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// secretish names a variable whose value must never be written in a file.
var secretish = regexp.MustCompile(`(?i)(PASSWORD|API_KEY|SECRET|TOKEN|_DSN$)`)

// dockerInstructions parses a Dockerfile into instructions (continuations
// joined, comments dropped): [keyword, rest].
func dockerInstructions(t *testing.T, path string) [][2]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		kw, rest, _ := strings.Cut(cur.String(), " ")
		out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
		cur.Reset()
	}
	return out
}

// The image: multi-stage, a static binary (CGO_ENABLED=0), a non-root USER
// in the final stage, a HEALTHCHECK, no secret in ENV or ARG.
func TestDockerfile(t *testing.T) {
	ins := dockerInstructions(t, "Dockerfile")
	known := []string{"FROM", "WORKDIR", "COPY", "RUN", "ARG", "ENV", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "LABEL"}
	var stages, lastFrom int
	for i, in := range ins {
		if !slices.Contains(known, in[0]) {
			t.Errorf("unknown instruction %q", in[0])
		}
		if in[0] == "FROM" {
			stages++
			lastFrom = i
		}
		if in[0] == "ENV" || in[0] == "ARG" {
			for _, f := range strings.Fields(in[1]) {
				if k, v, ok := strings.Cut(f, "="); ok && secretish.MatchString(k) && v != "" {
					t.Errorf("%s %s bakes a secret into the image", in[0], k)
				}
			}
		}
	}
	if stages < 2 {
		t.Errorf("%d stages, want a multi-stage build", stages)
	}
	var cgoOff, health bool
	user := ""
	for i, in := range ins {
		if i < lastFrom && (in[0] == "ENV" || in[0] == "RUN") && strings.Contains(in[1], "CGO_ENABLED=0") {
			cgoOff = true
		}
		if i > lastFrom {
			switch in[0] {
			case "USER":
				user = in[1]
			case "HEALTHCHECK":
				health = in[1] != "NONE"
			}
		}
	}
	if !cgoOff {
		t.Error("the build stage does not set CGO_ENABLED=0 (static binary)")
	}
	if name, _, _ := strings.Cut(user, ":"); user == "" || name == "root" || name == "0" {
		t.Errorf("final stage USER %q, want a non-root user", user)
	}
	if !health {
		t.Error("final stage has no HEALTHCHECK")
	}
}

// The compose file: strict YAML, the scale topology's services, agentry
// services configured by AGENTRY_* and every secret from the operator's
// environment (${VAR}), never a literal.
func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   any               `yaml:"depends_on"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
		Restart     string            `yaml:"restart"`
	}
	var doc struct {
		Name     string             `yaml:"name"`
		Env      map[string]string  `yaml:"x-agentry-env"`
		Services map[string]service `yaml:"services"`
		Volumes  map[string]any     `yaml:"volumes"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, want := range []string{"postgres", "temporal", "temporal-ui", "gateway-1", "gateway-2", "worker"} {
		if _, ok := doc.Services[want]; !ok {
			t.Errorf("no service %q", want)
		}
	}
	for name, s := range doc.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		for k, v := range s.Environment {
			if secretish.MatchString(k) && !strings.Contains(v, "${") {
				t.Errorf("%s: %s is a literal; take it from the environment (${%s})", name, k, k)
			}
		}
		if strings.HasPrefix(name, "gateway") || name == "worker" {
			for _, k := range []string{"AGENTRY_TEMPORAL_ADDRESS", "AGENTRY_STORAGE_BACKEND", "AGENTRY_STORAGE_DSN"} {
				if s.Environment[k] == "" {
					t.Errorf("%s: %s not set", name, k)
				}
			}
		}
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				t.Errorf("%s: bind mount %q; the topology uses named volumes", name, v)
			}
		}
	}
	if c := doc.Services["worker"].Command; len(c) == 0 || c[0] != "worker" {
		t.Errorf("worker command %v, want [worker]", c)
	}
	if c := doc.Services["temporal"].Command; !slices.Equal(c, []string{"dev", "temporal"}) || doc.Services["temporal"].Environment["AGENTRY_TEMPORAL_POSTGRES_DSN"] == "" {
		t.Errorf("temporal: %v without its PostgreSQL DSN", c)
	}
}

// The Kubernetes manifests decode strictly (unknown fields refused) into
// the API types; Deployments select their own pods, run non-root, probe
// /health (gateways), and take every secret from a Secret reference.
func TestKubernetesManifests(t *testing.T) {
	files, _ := filepath.Glob("k8s/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	kinds := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			if strings.TrimSpace(part) == "" {
				continue
			}
			where := fmt.Sprintf("%s#%d", f, i)
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := sigsyaml.Unmarshal([]byte(part), &meta); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			kinds[meta.Kind]++
			switch meta.Kind {
			case "Deployment":
				var d appsv1.Deployment
				if err := sigsyaml.UnmarshalStrict([]byte(part), &d); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				checkDeployment(t, where, &d)
			case "Service":
				var s corev1.Service
				if err := sigsyaml.UnmarshalStrict([]byte(part), &s); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if len(s.Spec.Selector) == 0 || len(s.Spec.Ports) == 0 {
					t.Errorf("%s: service without selector or ports", where)
				}
			case "ConfigMap":
				var c corev1.ConfigMap
				if err := sigsyaml.UnmarshalStrict([]byte(part), &c); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				for k := range c.Data {
					if !strings.HasPrefix(k, "AGENTRY_") || secretish.MatchString(k) {
						t.Errorf("%s: ConfigMap key %s (only non-secret AGENTRY_* keys)", where, k)
					}
				}
			default:
				t.Errorf("%s: unexpected kind %q", where, meta.Kind)
			}
		}
	}
	if kinds["Deployment"] < 2 || kinds["Service"] < 1 || kinds["ConfigMap"] < 1 {
		t.Errorf("kinds %v, want gateway and worker Deployments, a Service, a ConfigMap", kinds)
	}
}

func checkDeployment(t *testing.T, where string, d *appsv1.Deployment) {
	t.Helper()
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("%s: selector %s=%s does not match the pod template", where, k, v)
		}
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pod does not require runAsNonRoot", where)
	}
	worker := false
	for _, c := range pod.Containers {
		worker = worker || slices.Contains(c.Args, "worker")
		for _, e := range c.Env {
			if secretish.MatchString(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s: %s must come from a secretKeyRef", where, e.Name)
			}
		}
		if !worker {
			for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" {
					t.Errorf("%s: container %s has no %s probe on /health", where, c.Name, name)
				}
			}
		}
	}
}
