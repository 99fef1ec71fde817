// Package hub fetches checkpoints from the Hugging Face Hub into the Hugging Face cache shared
// with Python's huggingface_hub, and finds them there offline.
//
// It owns the cache layout (models--Org--Name/{blobs,snapshots/<commit>,refs}/, the cache folder
// from HF_HUB_CACHE / HF_HOME), the Hub's HTTP protocol (revision lookup, resolve URLs, LFS
// redirects with X-Linked-Etag), resumable downloads checked against their ETag, the per-blob
// locks it shares with Python, tokens (HF_TOKEN, the login token file), offline mode
// (HF_HUB_OFFLINE) and its timeouts. It knows nothing of what the files hold: checking them is
// the loader package's job (safetensors, shard index, manifests).
package hub
