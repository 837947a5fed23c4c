package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// applyMapEnv overrides fields of entries in keyed maps, which go-envconfig
// cannot address: AGENTRY_LLM_PROVIDERS_<ID>_<FIELD> and
// AGENTRY_COSTS_PRICING_<PROVIDER/MODEL>_<FIELD>. <ID> is the entry's id
// upper-cased with every character outside [A-Z0-9] turned into "_"; only
// ids that already exist (in defaults or the file) can be addressed.
func applyMapEnv(cfg *Config, env Env) error {
	for id, p := range cfg.LLM.Providers {
		if err := overrideStruct(&p, EnvPrefix+"LLM_PROVIDERS_"+envID(id)+"_", env); err != nil {
			return err
		}
		cfg.LLM.Providers[id] = p
	}
	// A platform's channel can be configured from the environment alone
	// (AGENTRY_CHANNELS_TELEGRAM_BOT_TOKEN=...): its entry is made when a
	// variable names one of its keys.
	for _, typ := range MessagingTypes {
		if _, ok := cfg.Channels.Messaging[typ]; !ok && anyFieldEnv(MessagingChannelConfig{}, EnvPrefix+"CHANNELS_"+envID(typ)+"_", env) {
			if cfg.Channels.Messaging == nil {
				cfg.Channels.Messaging = map[string]MessagingChannelConfig{}
			}
			cfg.Channels.Messaging[typ] = MessagingChannelConfig{}
		}
	}
	for id, ch := range cfg.Channels.Messaging {
		if err := overrideStruct(&ch, EnvPrefix+"CHANNELS_"+envID(id)+"_", env); err != nil {
			return err
		}
		cfg.Channels.Messaging[id] = ch
	}
	for id, p := range cfg.Costs.Pricing {
		if err := overrideStruct(&p, EnvPrefix+"COSTS_PRICING_"+envID(id)+"_", env); err != nil {
			return err
		}
		cfg.Costs.Pricing[id] = p
	}
	return nil
}

func envID(id string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(id) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// anyFieldEnv tells whether a <prefix><YAML_KEY> variable is set for a
// field of v's struct type.
func anyFieldEnv(v any, prefix string, env Env) bool {
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		if _, ok := env(prefix + strings.ToUpper(name)); ok {
			return true
		}
	}
	return false
}

// overrideStruct sets scalar and string-slice fields of ptr from
// <prefix><YAML_KEY> variables.
func overrideStruct(ptr any, prefix string, env Env) error {
	v := reflect.ValueOf(ptr).Elem()
	t := v.Type()
	for i := range t.NumField() {
		name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		key := prefix + strings.ToUpper(name)
		raw, ok := env(key)
		if !ok {
			continue
		}
		if err := setScalar(v.Field(i), raw); err != nil {
			return fmt.Errorf("environment variable %s=%q: %v", key, raw, err)
		}
	}
	return nil
}

func setScalar(f reflect.Value, raw string) error {
	if f.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Float64, reflect.Float32:
		n, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return err
		}
		f.SetFloat(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("cannot be set from the environment")
		}
		parts := strings.Split(raw, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		f.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}
