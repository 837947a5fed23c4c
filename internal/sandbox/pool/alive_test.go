package pool_test

import (
	"os"
	"strconv"
)

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && len(b) > 0 && !containsState(string(b), "Z")
}

func containsState(stat, s string) bool {
	// the state is the field after the ")" of comm
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return len(stat) > i+2 && string(stat[i+2]) == s
		}
	}
	return false
}
