// A certified OpenID Connect provider (panva's oidc-provider) for the sign-in tests.
//
//   node provider.mjs PORT ACCOUNTS_JSON CLIENTS_JSON
//
// ACCOUNTS_JSON maps a login to its claims ({"alice": {"email": ..., "groups": [...]}}) and is
// read again at every sign-in, refresh and userinfo call: a test changes a person's groups by
// rewriting it. The provider's own login and consent pages (its development interactions)
// accept any password for a login the file names. Prints "listening <issuer>" once it serves.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const [port, accountsFile, clientsFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

function accounts() {
  return JSON.parse(readFileSync(accountsFile, 'utf8'));
}

const provider = new Provider(issuer, {
  clients: JSON.parse(readFileSync(clientsFile, 'utf8')),
  async findAccount(ctx, id) {
    const claims = accounts()[id];
    if (!claims) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...claims }; } };
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  features: { deviceFlow: { enabled: true }, devInteractions: { enabled: true } },
  // every grant of a client allowed to refresh gets a refresh token (no offline_access prompt)
  async issueRefreshToken(ctx, client) { return client.grantTypeAllowed('refresh_token'); },
  pkce: { required: () => true },
  ttl: { AccessToken: 600, IdToken: 600, RefreshToken: 86400, DeviceCode: 600, Session: 86400, Grant: 86400, Interaction: 600 },
});

const server = provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
