// An authorization server for the tests: oidc-provider on 127.0.0.1 (a free port), with one
// confidential client allowed the client-credentials grant. Its access tokens are JWTs whose
// audience is OIDC_RESOURCE and whose scope may include OIDC_SCOPE. It prints
// "listening <port>" once it answers, and exits when its stdin closes.
//
// Environment: OIDC_RESOURCE (the resource URI), OIDC_SCOPE, OIDC_CLIENT_ID,
// OIDC_CLIENT_SECRET, OIDC_TTL (the access tokens' lifetime in seconds, default 300).
import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const resource = process.env.OIDC_RESOURCE;
const scope = process.env.OIDC_SCOPE || 'mcp:run';
const ttl = Number(process.env.OIDC_TTL || 300);
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-es256', alg: 'ES256', use: 'sig' };

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const provider = new Provider(`http://127.0.0.1:${port}`, {
    jwks: { keys: [jwk] },
    clients: [{
      client_id: process.env.OIDC_CLIENT_ID,
      client_secret: process.env.OIDC_CLIENT_SECRET,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      id_token_signed_response_alg: 'ES256',
      scope,
    }],
    scopes: [scope],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // go-sdk's client-credentials handler sends no resource parameter: the resource
        // server's URI is the default. mcp-sandbox's upstream client sends it (RFC 8707).
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
          return { scope, audience: resource, accessTokenFormat: 'jwt', accessTokenTTL: ttl, jwt: { sign: { alg: 'ES256' } } };
        },
      },
    },
  });
  provider.on('server_error', (_ctx, err) => console.error('oidc-provider error:', err));
  provider.on('grant.error', (_ctx, err) => console.error('oidc-provider grant error:', err.message, err.error_description || ''));
  server.on('request', provider.callback());
  process.stdout.write(`listening ${port}\n`);
});

process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
