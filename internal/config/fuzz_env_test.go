package config

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzApplyEnv: any set of AGENTRY_* environment overrides is applied (and
// the result then validates or is refused) or is an error naming the
// variable; never a panic, and a configuration that validates holds no
// NaN or infinite number (a NaN budget compares false with every spend, so
// it would never stop one). The input is
// the environment as KEY=VALUE lines; the seeds address every key the
// configuration has (typed fields through go-envconfig, entries of keyed
// maps through applyMapEnv) with good and bad values.
func FuzzApplyEnv(f *testing.F) {
	for _, key := range envKeys(reflect.TypeOf(Config{}), EnvPrefix) {
		for _, v := range []string{"1", "-1", "1.5", "true", "yes", "10s", "a,b", "", "0x10", "99999999999999999999", "\x00"} {
			f.Add(key + "=" + v)
		}
	}
	for _, s := range []string{
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL=http://127.0.0.1:1\nAGENTRY_LLM_PROVIDERS_OLLAMA_MAX_RETRIES=x",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_TIMEOUT=-5s", "AGENTRY_LLM_PROVIDERS_OLLAMA_HEADERS=a:b",
		"AGENTRY_SERVER_PORT=8080\nAGENTRY_SERVER_PORT=1.5", "AGENTRY_SERVER_CORS_ALLOW_ORIGINS=,,,",
		"AGENTRY_COSTS_PRICING_OPENAI_GPT_4O_INPUT_PER_MTOK=NaN", "AGENTRY_=1", "=", "AGENTRY_SERVER_=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		vars := map[string]string{}
		for _, line := range strings.Split(doc, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		cfg := Defaults()
		err := ApplyEnv(context.Background(), &cfg, MapEnv(vars))
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, EnvPrefix) && !strings.HasPrefix(msg, "environment overrides") {
				t.Fatalf("error names no variable: %v", err)
			}
			return
		}
		normalize(&cfg)
		if Validate(&cfg) != nil {
			return
		}
		if bad := nonFinite(reflect.ValueOf(cfg), ""); len(bad) > 0 {
			t.Fatalf("accepted a number that is not finite: %v", bad)
		}
	})
}

// envKeys lists the AGENTRY_* variables of the typed fields of rt (the
// env tags; TestEnvTagsMatchYAMLKeys keeps them equal to the YAML keys).
func envKeys(rt reflect.Type, prefix string) []string {
	var out []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := strings.Split(f.Tag.Get("env"), ",")
		if f.Tag.Get("env") == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			p := ""
			for _, part := range tag[1:] {
				if s, ok := strings.CutPrefix(strings.TrimSpace(part), "prefix="); ok {
					p = s
				}
			}
			out = append(out, envKeys(f.Type, prefix+p)...)
			continue
		}
		out = append(out, prefix+tag[0])
	}
	return out
}
