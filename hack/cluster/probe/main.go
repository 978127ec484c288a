// Command probe is the one-node cluster's smoke test workload (test/cluster).
//
//	probe serve [ADDR]   HTTP on ADDR (default :8080): /healthz; / answers with the pod's hostname;
//	                     /whoami asks the API server who the pod's ServiceAccount token is
//	                     (a SelfSubjectReview) and answers with the user name
//	probe get URL...     GETs each URL, prints "GET URL -> STATUS BODY", exits 1 if one fails
//	probe blocked URL    GETs URL once a second until a GET fails (a NetworkPolicy took effect) and
//	                     exits 0, printing the error; exits 1 if the first 30 all succeed
//	probe reach URL...   GETs each URL once a second until one answers 200 OK (a NetworkPolicy
//	                     controller admits a new pod once it has seen its address), or for a
//	                     tcp://HOST:PORT URL until a TCP connection opens; exits 1 after 30 tries
//	probe isolated URL TARGET...
//	                     reach URL (so the pod's traffic is admitted where a policy allows it), then
//	                     tries each TARGET once and exits 1 if one answers: an http:// TARGET is a
//	                     GET, a tcp://HOST:PORT TARGET a TCP connection
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve [ADDR] | probe get URL...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		addr := ":8080"
		if len(os.Args) > 2 {
			addr = os.Args[2]
		}
		if err := serve(addr); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
	case "get":
		os.Exit(get(os.Args[2:]))
	case "blocked":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: probe blocked URL")
			os.Exit(2)
		}
		os.Exit(blocked(os.Args[2]))
	case "isolated":
		if len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "usage: probe isolated URL TARGET...")
			os.Exit(2)
		}
		os.Exit(isolated(os.Args[2], os.Args[3:]))
	case "reach":
		if len(os.Args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: probe reach URL...")
			os.Exit(2)
		}
		for _, u := range os.Args[2:] {
			if rc := reach(u); rc != 0 {
				os.Exit(rc)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "probe: unknown command", os.Args[1])
		os.Exit(2)
	}
}

func serve(addr string) error {
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s\n", host) })
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) {
		user, err := whoami()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintf(w, "user %s\n", user)
	})
	fmt.Println("serving on", addr)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.ListenAndServe()
}

// whoami posts a SelfSubjectReview to the API server with the pod's ServiceAccount token and
// returns the user name the API server authenticated it as.
func whoami() (string, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", errors.New("no certificate in " + saDir + "/ca.crt")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, "https://"+host+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("selfsubjectreview via %s: %s: %s", host, resp.Status, b)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &review); err != nil {
		return "", fmt.Errorf("selfsubjectreview: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

func get(urls []string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	rc := 0
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Printf("GET %s -> error: %v\n", u, err)
			rc = 1
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		fmt.Printf("GET %s -> %s %s", u, resp.Status, b)
		if resp.StatusCode != http.StatusOK {
			rc = 1
		}
	}
	return rc
}

func blocked(url string) int {
	client := &http.Client{Timeout: 3 * time.Second}
	for i := 1; i <= 30; i++ {
		resp, err := client.Get(url)
		if err != nil {
			fmt.Printf("GET %s -> blocked after %d tries: %v\n", url, i, err)
			return 0
		}
		resp.Body.Close()
		fmt.Printf("GET %s -> %s (try %d)\n", url, resp.Status, i)
		time.Sleep(time.Second)
	}
	return 1
}

func reach(url string) int {
	client := &http.Client{Timeout: 3 * time.Second}
	addr, dial := strings.CutPrefix(url, "tcp://")
	for i := 1; i <= 30; i++ {
		if dial {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				fmt.Printf("DIAL %s -> error (try %d): %v\n", addr, i, err)
				time.Sleep(time.Second)
				continue
			}
			c.Close()
			fmt.Printf("DIAL %s -> connected\nreached after %d tries\n", addr, i)
			return 0
		}
		resp, err := client.Get(url)
		if err != nil {
			fmt.Printf("GET %s -> error (try %d): %v\n", url, i, err)
			time.Sleep(time.Second)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		fmt.Printf("GET %s -> %s %s", url, resp.Status, b)
		if resp.StatusCode == http.StatusOK {
			fmt.Printf("reached after %d tries\n", i)
			return 0
		}
		time.Sleep(time.Second)
	}
	return 1
}

func isolated(url string, targets []string) int {
	if rc := reach(url); rc != 0 {
		return rc
	}
	rc := 0
	for _, t := range targets {
		if addr, ok := strings.CutPrefix(t, "tcp://"); ok {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				fmt.Printf("DIAL %s -> blocked: %v\n", addr, err)
				continue
			}
			c.Close()
			fmt.Printf("DIAL %s -> connected\n", addr)
			rc = 1
			continue
		}
		client := &http.Client{Timeout: 3 * time.Second}
		resp, err := client.Get(t)
		if err != nil {
			fmt.Printf("GET %s -> blocked: %v\n", t, err)
			continue
		}
		resp.Body.Close()
		fmt.Printf("GET %s -> %s\n", t, resp.Status)
		rc = 1
	}
	return rc
}
