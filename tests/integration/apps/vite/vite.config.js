// No host settings: behind lizard-gateway this port has `host:<n> localhost`,
// so Vite sees itself at http://localhost:<n> and its default allowedHosts
// (localhost, IP literals) pass; the HMR client connects to the page's own
// origin (the preview host), which the gateway forwards to Vite's WebSocket.
export default {
    clearScreen: false,
    server: { strictPort: true },
};
