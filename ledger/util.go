package ledger

import "sort"

func sortStrings(s []string) []string {
	sort.Strings(s)
	return s
}

func sortMaterial(m []MaterialRead) []MaterialRead {
	out := append([]MaterialRead(nil), m...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
