//go:build !darwin && !windows

package main

// localAdvice follows a refusal of `backend: local`.
const localAdvice = "install bubblewrap (apt-get install bubblewrap) or enable user namespaces, or lower the profile's isolation"
