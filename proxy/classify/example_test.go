package classify_test

import (
	"fmt"
	"strings"

	"github.com/kestrelops/tandem/proxy/classify"
)

func Example() {
	index := classify.NewIndex(classify.DefaultOptions(), nil)
	sampler := classify.NewConversationSampler(1)
	system := strings.Repeat("You answer questions about our product. ", 20)
	for _, question := range []string{"How do I reset my password?", "Where is my invoice?"} {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`, system, question)
		prompt, err := classify.ParsePrompt([]byte(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		if !sampler.Sampled("", prompt) {
			continue
		}
		class, reuse := index.Classify(prompt.Text)
		fmt.Printf("%s %.2f\n", class, reuse)
	}
	// Output:
	// fresh 0.00
	// repeated_prefix 0.92
}

func ExampleClassFor() {
	allowed := map[string]bool{"batch": true}
	fmt.Println(classify.ClassFor("batch", allowed, "fresh"))
	fmt.Println(classify.ClassFor("vip", allowed, "fresh"))
	// Output:
	// batch
	// fresh
}
