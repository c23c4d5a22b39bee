// Command cron-golden prints, as JSON, what robfig/cron v3's ParseStandard (the parser whereabouts
// 0.9 schedules its reconciler with) makes of a corpus of schedules: the error for each one it
// rejects, and the next activations from fixed start instants for each one it accepts.
// test/domain/cron.test.ts holds src/domain/cron.ts to this output.
//
// Regenerate from the repository root (Go 1.22 or later, the module proxy reachable):
//
//	go -C scripts/cron-golden run . > test/domain/fixtures/robfig-cron-golden.json
//
// The output depends only on this corpus, robfig/cron v3.0.1 and the zone database Go finds
// (/usr/share/zoneinfo, else the copy embedded below): a changed golden file after a tzdata update
// means a zone's future rules changed.
//
// Start instants are passed in UTC, so schedules without a zone prefix (robfig's time.Local,
// which Next takes as the zone of the instant it is given) are evaluated in UTC, as our
// controller does, whatever the zone of the machine that runs this.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"time"
	_ "time/tzdata" // zone data even on a machine without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// runs is how many activations are chained from each start instant.
const runs = 5

var starts = []string{
	"2026-01-01T00:00:00.000Z", // on a boundary of every field
	"2026-03-07T12:00:00.000Z", // New York springs forward 2026-03-08 02:00 (Havana at 00:00)
	"2026-03-28T12:00:00.000Z", // Berlin springs forward 2026-03-29 02:00
	"2026-10-03T12:00:00.000Z", // Lord Howe springs forward half an hour 2026-10-04 02:00
	"2026-10-24T12:00:00.000Z", // Berlin falls back 2026-10-25 03:00
	"2026-10-25T00:30:00.000Z", // 02:30 CEST: inside Berlin's repeated hour, first pass
	"2026-10-31T12:00:00.000Z", // New York falls back 2026-11-01 02:00 (Havana at 01:00)
	"2026-11-01T05:30:00.000Z", // 01:30 EDT: inside New York's repeated hour, first pass
	"2028-02-28T23:59:59.999Z", // before a leap day, not on a second
	"2097-03-01T00:00:00.000Z", // the next leap day (2104) is beyond robfig's five-year search
	"1969-12-31T23:59:59.250Z", // before the epoch, not on a second
}

var corpus = []string{
	// Plain five-field expressions.
	"30 4 * * *", // whereabouts' default
	"* * * * *",
	"0 * * * *",
	"*/15 * * * *",
	"0 */6 * * *",
	"5/10 * * * *",
	"*/1 * * * *",
	"*/60 * * * *",
	"*/100 * * * *",
	"0-59/7 * * * *",
	"10-20/3 * * * *",
	"1,5,10-12 * * * *",
	"1,,2 * * * *",
	",5 * * * *",
	"+5 * * * *",
	"05 04 * * *",
	"00000000000000000000005 4 * * *",
	"*/9223372036854775807 * * * *",
	"0 0 * * 0-6",
	"59 23 31 12 *",
	"0 12 * * *",
	// ? is the same as *.
	"* * * * ?",
	"? ? ? ? ?",
	"0 0 ? * 1",
	"0 0 13 * ?",
	"?/5 * * * *",
	// Names, any case, in ranges and lists.
	"0 0 * * sun",
	"0 0 * * MON-FRI",
	"0 0 * * Mon,Wed,fri",
	"0 0 1 jan *",
	"0 0 1 JAN-MAR *",
	"0 0 * dec sun",
	"0 0 1 jan/3 *",
	"0 0 * * 1-fri",
	// Day of month and day of week together.
	"0 0 1 * *",
	"0 0 * * 1",
	"0 0 1 * 1",
	"0 0 13 * 5",
	"0 0 */2 * 1",
	"0 0 1-31/2 * 1",
	"0 0 */1 * 1",
	"0 0 1,* * 1",
	"0 0 1 * *,1",
	"0 0 1-31 * 1",
	"0 0 1 * 0-6",
	"0 0 1 * */2",
	"0 0 * * */2",
	"0 0 */2 * */2",
	"0 0 *-5 * 1",
	"0 0 29 2 1",
	"0 0 15 * 1-5",
	// Fields that can never match, or only rarely.
	"0 0 29 2 *",
	"0 0 30 2 *",
	"0 0 31 4,6,9,11 *",
	"0 0 31 * *",
	"0 0 , * *",
	"0 0 , * 1",
	"0 0 1 * ,",
	"0 0 , * ,",
	", * * * *",
	// The star quirks: anything after "*-" is ignored.
	"*-5 * * * *",
	"*-x * * * *",
	"*-1-2 * * * *",
	"*-5/20 * * * *",
	// Whitespace.
	"0\t0 * *\t*",
	"  30 4 * * *  ",
	"30 4 * * *\n",
	"30\u00a04 * * *",
	"30\u00854 * * *",
	"30\ufeff4 * * *",
	// Descriptors.
	"@yearly",
	"@annually",
	"@monthly",
	"@weekly",
	"@daily",
	"@midnight",
	"@hourly",
	"@every 1h30m",
	"@every 90s",
	"@every 500ms",
	"@every 1.5s",
	"@every 1h30m10.5s",
	"@every 0",
	"@every -1h",
	"@every +2m",
	"@every .5m",
	"@every 1.h",
	"@every 1us",
	"@every 1µs",
	"@every 24h",
	"@every 8760h",
	"@every 2562047h47m16.854775807s",
	"@every 1.0000000000000000000000001s",
	"@every 0.9999999999999999999999s",
	// Zone prefixes.
	"CRON_TZ=Europe/Berlin 30 2 * * *",
	"CRON_TZ=Europe/Berlin 0 * * * *",
	"CRON_TZ=Europe/Berlin 0 0 * * *",
	"CRON_TZ=Europe/Berlin */30 1-3 * * *",
	"CRON_TZ=Europe/Berlin 0 3 * * *",
	"CRON_TZ=Europe/Berlin 15 2 * * *",
	"CRON_TZ=Europe/Berlin 0 0 29 2 *",
	"TZ=Europe/Berlin 30 2 25 10 *",
	"TZ=America/New_York 30 2 * * *",
	"TZ=America/New_York 30 1 * * *",
	"CRON_TZ=America/New_York 0 * * * *",
	"CRON_TZ=America/New_York 0 3 * * *",
	"CRON_TZ=America/New_York 45 1 * * *",
	"CRON_TZ=America/New_York 0 0 1 * 0",
	"CRON_TZ=America/Havana 0 0 * * *",
	"CRON_TZ=America/Havana 30 0 * * *",
	"CRON_TZ=America/Havana 0 1 * * *",
	"CRON_TZ=Australia/Lord_Howe 0 2 * * *",
	"CRON_TZ=Australia/Lord_Howe 15 2 * * *",
	"CRON_TZ=Australia/Lord_Howe 0 * * * *",
	"CRON_TZ=Asia/Kolkata 0 0 * * *",
	"CRON_TZ=Pacific/Chatham 0 0 * * *",
	"CRON_TZ=UTC 0 0 * * *",
	"CRON_TZ=Etc/UTC 0 0 * * *",
	"CRON_TZ=GMT 0 0 * * *",
	"CRON_TZ=Zulu 0 0 * * *",
	"CRON_TZ=EST 0 0 * * *",
	"CRON_TZ=EST5EDT 0 0 * * *",
	"CRON_TZ=Etc/GMT-14 0 0 * * *",
	"CRON_TZ=US/Eastern 30 2 * * *",
	"CRON_TZ=Asia/Calcutta 0 0 * * *",
	"CRON_TZ=Europe/Kyiv 0 0 * * *",
	"CRON_TZ=Local 0 0 * * *",
	"CRON_TZ=Asia/Katmandu 0 0 * * *",
	"CRON_TZ=America/Godthab 0 0 * * *",
	"CRON_TZ=Etc/GMT+12 0 0 * * *",
	"CRON_TZ=GMT+0 0 0 * * *",
	"CRON_TZ=NZ-CHAT 0 0 * * *",
	"TZ= 0 0 * * *",
	"CRON_TZ=UTC  0 0 * * *",
	"CRON_TZ=UTC @daily",
	"CRON_TZ=Europe/Berlin @daily",
	"CRON_TZ=America/New_York @hourly",
	"TZ=Europe/Berlin @every 1h",
	"CRON_TZ=Europe/Berlin   @weekly   ",

	// Rejected: shape.
	"",
	" ",
	"* * * *",
	"* * * * * *",
	"0 0 0 * * *",
	"30 4 * * * 2026",
	// Rejected: values out of range.
	"60 * * * *",
	"61 * * * *",
	"* 24 * * *",
	"* * 0 * *",
	"* * 32 * *",
	"* * * 0 *",
	"* * * 13 *",
	"* * * * 7",
	"0 0 * * 0,7",
	"* * * * 8",
	"0-60 * * * *",
	// Rejected: ranges and steps.
	"5-3 * * * *",
	"1-2-3 * * * *",
	"*/0 * * * *",
	"5/0 * * * *",
	"*/-1 * * * *",
	"1/2/3 * * * *",
	"*/5-3 * * * *",
	"*/9223372036854775808 * * * *",
	"*/mon * * * *",
	"- * * * *",
	"1- * * * *",
	"-1 * * * *",
	"/5 * * * *",
	// Rejected: not numbers, or names in the wrong field.
	"a * * * *",
	"*/a * * * *",
	"1.5 * * * *",
	"0x10 * * * *",
	"1_0 * * * *",
	"0 0 * * jan",
	"0 0 1 sun *",
	"jan * * * *",
	"0 0 * * monday",
	"30\ufeff4 * * * *",
	// Rejected: Quartz and Vixie extensions robfig does not have.
	"L * * * *",
	"0 0 L * *",
	"0 0 * * 1#2",
	"0 0 15W * *",
	"0 0 * * 5L",
	"@reboot",
	// Rejected: descriptors.
	"@Daily",
	"@DAILY",
	"@daily ",
	" @daily",
	"@foo",
	"@",
	"@every",
	"@every ",
	"@every 1h ",
	"@every  1h",
	"@every 1H",
	"@every 1d",
	"@every 1",
	"@every 1h30",
	"@every 1h 30m",
	"@every .",
	"@every -",
	"@every 2562048h",
	"@every 9223372036854775808ns",
	"@every 1e3s",
	// Rejected: zone prefixes.
	"CRON_TZ=Mars/Olympus 0 0 * * *",
	"CRON_TZ=europe/berlin 0 0 * * *",
	"CRON_TZ=Europe/berlin 0 0 * * *",
	"CRON_TZ=EUROPE/BERLIN 0 0 * * *",
	"CRON_TZ=us/eastern 0 0 * * *",
	"CRON_TZ=US/EASTERN 0 0 * * *",
	"CRON_TZ=Etc/GMT+13 0 0 * * *",
	"CRON_TZ=PST 0 0 * * *",
	"CRON_TZ=IST 0 0 * * *",
	"CRON_TZ=SystemV/EST5 0 0 * * *",
	"CRON_TZ=US/Pacific-New 0 0 * * *",
	"CRON_TZ=Canada/East-Saskatchewan 0 0 * * *",
	"CRON_TZ=+01:00 0 0 * * *",
	"CRON_TZ=../zoneinfo/UTC 0 0 * * *",
	"CRON_TZ=/etc/localtime 0 0 * * *",
	"TZ=UTC\t0 0 * * *",
	"cron_tz=UTC 0 0 * * *",
	"TZ=UTC 0 0 * *",
	"TZ=UTC ",
	"TZ= ",
	"TZ=UTC",
	"CRON_TZ=",
	"TZ=Europe/Berlin TZ=UTC 0 0 * * *",
}

// durations feed Go's time.ParseDuration, the syntax of "@every <duration>", on their own: the
// schedules above show only whole seconds of them.
var durations = []string{
	"0", "+0", "-0", "", "1h30m", "90s", "500ms", "1.5s", ".5m", "5.s", "1.h", "+.5s", "-1h",
	"1us", "1µs", "1μs", "1.5µs", "3h2m1.5s", "1h1h", "0.1ns", "1.9ns", "1.0000000001h",
	"0.3333333333333333h", "1.00000000000000000000000000001h", "1.9999999999999999999s",
	"9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns", "-9223372036854775809ns",
	"9223372036854775.807us", "9223372036854775.808us", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
	"2562047.78812h", "99999999999999999999ns", "1", "1h30", "1d", "1H", "h", ".h", ".", "-", "+", "1e3s",
	"1.2.3s", "1 h", "1h ", " 1h", "１h",
}

// fuzzCases is how many generated expressions follow the corpus; fuzzStarts and fuzzRuns bound
// their activations.
const (
	fuzzCases  = 300
	fuzzStarts = 2
	fuzzRuns   = 3
)

type field struct {
	min, max int
	names    []string
}

var fields = []field{
	{0, 59, nil},
	{0, 23, nil},
	{1, 31, nil},
	{1, 12, []string{"jan", "Feb", "MAR", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{0, 6, []string{"sun", "Mon", "TUE", "wed", "thu", "fri", "sat"}},
}

var fuzzZones = []string{"", "", "", "", "CRON_TZ=UTC ", "CRON_TZ=Europe/Berlin ", "TZ=America/New_York ", "CRON_TZ=Australia/Lord_Howe ", "CRON_TZ=Asia/Kolkata "}

// fuzzValue is mostly a valid value of f, sometimes one just outside it, sometimes its name.
func fuzzValue(r *rand.Rand, f field, v int) string {
	switch n := r.Intn(60); {
	case n == 0:
		return fmt.Sprint(f.max + 1)
	case n == 1 && f.min > 0:
		return fmt.Sprint(f.min - 1)
	case n < 12 && f.names != nil:
		return f.names[v-f.min]
	default:
		return fmt.Sprint(v)
	}
}

// fuzzRange is a range of f that runs forwards four times in five.
func fuzzRange(r *rand.Rand, f field) string {
	a, b := f.min+r.Intn(f.max-f.min+1), f.min+r.Intn(f.max-f.min+1)
	if a > b && r.Intn(5) > 0 {
		a, b = b, a
	}
	return fuzzValue(r, f, a) + "-" + fuzzValue(r, f, b)
}

func fuzzItem(r *rand.Rand, f field) string {
	step := func() string { return fmt.Sprint(r.Intn(f.max + 2)) }
	value := func() string { return fuzzValue(r, f, f.min+r.Intn(f.max-f.min+1)) }
	switch r.Intn(12) {
	case 0:
		return "*"
	case 1:
		return "?"
	case 2:
		return "*/" + step()
	case 3, 4:
		return value()
	case 5, 6:
		return fuzzRange(r, f)
	case 7:
		return fuzzRange(r, f) + "/" + step()
	case 8:
		return value() + "/" + step()
	case 9:
		return "*-" + value()
	case 10:
		return ""
	default:
		return "*"
	}
}

// fuzzExpression builds a mostly well-formed five-field expression, with a zone prefix at times.
func fuzzExpression(r *rand.Rand) string {
	parts := []string{}
	for _, f := range fields {
		items := []string{}
		for range 1 + r.Intn(3) {
			items = append(items, fuzzItem(r, f))
		}
		text := ""
		for i, item := range items {
			if i > 0 {
				text += ","
			}
			text += item
		}
		// A third of the fields are a plain "*", so the day-of-month/day-of-week rule meets it often.
		if r.Intn(3) == 0 {
			text = "*"
		}
		if text == "" {
			text = "," // a field that lists nothing (an empty one would change the field count)
		}
		parts = append(parts, text)
	}
	expression := fuzzZones[r.Intn(len(fuzzZones))]
	for i, p := range parts {
		if i > 0 {
			expression += " "
		}
		expression += p
	}
	return expression
}

type durationOutcome struct {
	Text string `json:"text"`
	// Nanos is the parsed duration in nanoseconds, in decimal (beyond JSON's safe integers).
	Nanos string `json:"nanos,omitempty"`
	Error string `json:"error,omitempty"`
}

type outcome struct {
	Expression string `json:"expression"`
	// Error is robfig's error text when it rejects the expression.
	Error string `json:"error,omitempty"`
	// Panicked marks an expression that makes ParseStandard panic instead of returning an error.
	Panicked bool `json:"panicked,omitempty"`
	// Runs maps each start instant to the activations chained from it; a null ends a chain where
	// Next returned the zero time (nothing within its five-year search).
	Runs map[string][]*string `json:"runs,omitempty"`
}

func parse(expression string) (schedule cron.Schedule, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("%v", r), true
		}
	}()
	schedule, err = cron.ParseStandard(expression)
	return schedule, err, false
}

func evaluate(expression string, starts []string, runs int) outcome {
	schedule, err, panicked := parse(expression)
	if err != nil {
		return outcome{Expression: expression, Error: err.Error(), Panicked: panicked}
	}
	result := outcome{Expression: expression, Runs: map[string][]*string{}}
	for _, start := range starts {
		t, err := time.Parse(time.RFC3339Nano, start)
		if err != nil {
			panic(err)
		}
		t = t.UTC()
		chain := []*string{}
		for range runs {
			t = schedule.Next(t)
			if t.IsZero() {
				chain = append(chain, nil)
				break
			}
			text := t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			chain = append(chain, &text)
		}
		result.Runs[start] = chain
	}
	return result
}

func line(v any) []byte {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func main() {
	out := os.Stdout
	fmt.Fprintf(out, "{\n  \"generator\": %s,\n  \"runs\": %d,\n  \"starts\": %s,\n  \"cases\": [\n",
		line(fmt.Sprintf("scripts/cron-golden: github.com/robfig/cron/v3 v3.0.1 ParseStandard and Next, %s", runtime.Version())),
		runs, line(starts))
	for _, expression := range corpus {
		fmt.Fprintf(out, "    %s,\n", line(evaluate(expression, starts, runs)))
	}
	// A fixed seed: math/rand's seeded source yields the same sequence on every Go version.
	r := rand.New(rand.NewSource(22))
	for i := range fuzzCases {
		sep := ","
		if i == fuzzCases-1 {
			sep = ""
		}
		fuzzStart := []string{}
		for range fuzzStarts {
			instant := time.UnixMilli(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + r.Int63n(15*365*24*3600*1000))
			fuzzStart = append(fuzzStart, instant.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		}
		fmt.Fprintf(out, "    %s%s\n", line(evaluate(fuzzExpression(r), fuzzStart, fuzzRuns)), sep)
	}
	fmt.Fprintln(out, "  ],\n  \"durations\": [")
	for i, text := range durations {
		sep := ","
		if i == len(durations)-1 {
			sep = ""
		}
		result := durationOutcome{Text: text}
		if d, err := time.ParseDuration(text); err != nil {
			result.Error = err.Error()
		} else {
			result.Nanos = fmt.Sprint(int64(d))
		}
		fmt.Fprintf(out, "    %s%s\n", line(result), sep)
	}
	fmt.Fprintln(out, "  ]\n}")
}
